"""The arm sequence: product and channel checks against the card, self-test, the log.

A PCIe-6351 (NI X Series specifications) has ai0..15, ao0..1, ctr0..3 and three ports
of 8 lines; a graph naming anything else is refused before any task is made, by the
simulated card in this process and through NI-DAQmx from the device's own lists.
"""
from pathlib import Path

import pytest

import hapflow as hf
from hapflow.cli import main
from hapflow.errors import GraphError
from hapflow.hil.arm import arm
from hapflow.hil.bindings import bind
from hapflow.hil.grpc_sim import serve
from hapflow.hil.nidaq import NidaqBackend
from hapflow.hil.runner import HilRunner
from hapflow.hil.simdaq import SimDaq
from hapflow.yamlio import loads

ROOT = Path(__file__).resolve().parents[1]
TESTBED = ROOT / "graphs" / "hil_testbed.yaml"
LINE9 = ("enable: Dev1/port0/line0", "enable: Dev1/port0/line9")
AI16 = ("channel: Dev1/ai0", "channel: Dev1/ai16")


def bed(change=None):
    text = TESTBED.read_text()
    return loads(text.replace(*change) if change else text, str(TESTBED))


@pytest.fixture(scope="module")
def server():
    graph = bed()
    srv, port = serve(graph, bind(graph).channels, paced=False)
    yield f"localhost:{port}"
    srv.stop(None)


@pytest.mark.parametrize("change, line, port, message", [
    (LINE9, 32, "motor.enable", "has no do channel 'port0/line9'; it has port0/line0..line7, "
                                "port1/line0..line7, port2/line0..line7"),
    (AI16, 35, "head.force", "has no ai channel 'ai16'; it has ai0..ai15")])
@pytest.mark.parametrize("daq", ["sim", "nidaqmx"])
def test_a_channel_the_card_lacks_is_refused_with_its_binding(server, change, line, port,
                                                              message, daq):
    graph = bed(change)
    backend = SimDaq(graph, paced=False) if daq == "sim" else NidaqBackend(server)
    with pytest.raises(GraphError) as e:
        HilRunner(graph, backend).run(0.01)
    err = e.value
    assert f"{TESTBED}:{line}: hardware {port}: Dev1 (PCIe-6351) {message}" == str(err)
    assert (err.block, err.port) == tuple(port.split("."))
    if daq == "sim":
        assert backend.rig is None                      # refused before the card was opened


@pytest.mark.parametrize("daq", ["sim", "nidaqmx"])
def test_the_arm_log_names_the_product_the_channels_and_the_self_test(server, daq):
    graph = bed()
    backend = SimDaq(graph, paced=False) if daq == "sim" else NidaqBackend(server)
    log = arm(backend, bind(graph))
    assert log == ["Dev1: PCIe-6351; 4 bound channels present (ai0, ctr0, ao0, port0/line0)",
                   "Dev1: self-test passed",
                   "encoder zero: Dev1/ctr0 count from 0 where the carriage sits when the "
                   "card starts (no home: positions and stroke limits are relative to it)"]
    backend.close()


def test_the_run_records_its_arm_log(tmp_path):
    result = HilRunner(bed(), SimDaq(bed(), paced=False)).run(0.05, out=tmp_path / "run.h5")
    rec = hf.recorder.load(result.path)
    assert rec.attrs["arm_log"].splitlines()[:2] == [
        "Dev1: PCIe-6351; 4 bound channels present (ai0, ctr0, ao0, port0/line0)",
        "Dev1: self-test passed"]


def test_hil_arm_command_prints_the_log_or_refuses_without_a_traceback(tmp_path, capsys):
    assert main(["hil", "arm", str(TESTBED)]) == 0
    out = capsys.readouterr().out
    assert "Dev1: PCIe-6351" in out and "self-test passed" in out
    assert "armed" in out.splitlines()[-1]
    bad = tmp_path / "bed.yaml"
    bad.write_text(TESTBED.read_text().replace(*LINE9))
    assert main(["hil", "arm", str(bad)]) != 0
    err = capsys.readouterr().err
    assert f"{bad}:32: hardware motor.enable: Dev1 (PCIe-6351) has no do channel" in err
    assert "Traceback" not in err
