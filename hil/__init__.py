"""Hardware in the loop (installed as ``hapflow.hil``).

The same graph file runs in simulation and in real time: its ``hardware:``
section names the blocks that become real and binds their ports to DAQ
channels.  Modules:

- :mod:`~hapflow.hil.backend`: the DAQ backend contract (channels in raw card units);
- :mod:`~hapflow.hil.bindings`: the ``hardware:`` section, parsed and validated;
- :mod:`~hapflow.hil.split`: the graph split into controller (real-time kernel) and plant;
- :mod:`~hapflow.hil.cardports`: the stand-in blocks at the split;
- :mod:`~hapflow.hil.simrig`: the plant behind a simulated 16-bit card, with fault injection;
- :mod:`~hapflow.hil.simdaq`: the ``sim`` backend (the simulated rig, paced by the clock);
- ``nidaq``: the NI-DAQmx backend; ``grpc_sim``/``grpc_card``: the simulated
  NI-DAQmx gRPC device server;
- :mod:`~hapflow.hil.clock`, :mod:`~hapflow.hil.realtime`: pacing and scheduling settings;
- :mod:`~hapflow.hil.runner`: the real-time loop; :mod:`~hapflow.hil.safety`: limits,
  watchdog, safety events; :mod:`~hapflow.hil.recording`: HDF5 written by a helper process;
- :mod:`~hapflow.hil.report`: the timing report; :mod:`~hapflow.hil.commands`: the CLI;
- :mod:`~hapflow.hil.agreement`: the same identification in simulation, on the simulated
  card and through gRPC (issue 6; ``bench/hil_ident.py``).

The simulated twins of hardware blocks are ordinary blocks in ``hapflow.blocks``.
"""
