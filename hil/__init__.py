"""Hardware in the loop (installed as ``hapflow.hil``).

Real-time runner, clocks, DAQ backends and the safety layer live here; the
simulated twins of hardware blocks are ordinary blocks in ``hapflow.blocks``.
"""
