"""Run the changing-contact device graphs and plot each like seed 003's figure 6.

Force and indicator function on top, positions or angles below, every mode
epoch shaded and every located switch marked.  Writes PNGs and HDF5
recordings to ``--out``; the piano graphs' sinks write their MIDI file and
WAV where the graphs say (``out/piano_action_*.mid``, ``.wav``).

Run: ``python examples/contact_devices.py [--out DIR] [--duration S]``
"""
import argparse
from pathlib import Path

import hapflow as hf
from hapflow.plotting import plot_modes
from hapflow.recorder import load as load_recording

ROOT = Path(__file__).resolve().parents[1]
FIGURES = {
    "piano_action_a": ([["piano.force", "piano.indicator"], ["user.y", "piano.hammer"]], "piano.mode"),
    "piano_action_b": ([["piano.force", "piano.indicator"],
                        ["user.y", "piano.key_angle", "piano.hammer"]], "piano.mode"),
    "bouncing_ball": ([["ball.force"], ["paddle.y", "ball.height"]], "ball.mode"),
    "virtual_wall": ([["wall.force"], ["finger.pos"]], "wall.force"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out/contact", help="output folder")
    parser.add_argument("--duration", type=float, help="simulated seconds (default: each graph's)")
    args = parser.parse_args()
    out = Path(args.out)
    for name, (panels, mode) in FIGURES.items():
        graph = hf.load(ROOT / "graphs" / f"{name}.yaml")
        result = hf.Simulation(graph).run(args.duration, out=out / f"{name}.h5", progress=False)
        rec = load_recording(out / f"{name}.h5")
        if name == "virtual_wall":                  # contact on/off as the "mode"
            rec.signals["wall.contact"] = (rec.signals["wall.force"] != 0).astype(int)
            mode = "wall.contact"
        plot_modes(rec, panels, mode, out / f"{name}.png")
        print(f"{name}: {result.summary()}; figure -> {out / name}.png")


if __name__ == "__main__":
    main()
