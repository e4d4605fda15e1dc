"""Chaos runs of the control plane (tests/test_chaos.py in CI, benchmarks/chaos.py at scale):

    from chaos.run import ChaosConfig, run_chaos
    report = run_chaos(settings, ChaosConfig(jobs=40, seed=1))   # settings: a stack whose tables exist
    report.clean, report.summary()

Modules: run (the simulation and its invariants), sim_cloud (an in-memory cloud and the ground truth),
bus (at-least-twice, shuffled, late delivery), faults (crashes around every store/queue/cloud call),
agents (node agents through the real agent protocol), clock (simulated time), memory_objects (the bucket).
"""
