"""Benchmarks that print tables (run `python -m cascader.bench.<name>`), and calibration against Vela."""
