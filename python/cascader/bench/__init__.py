"""Benchmarks and calibration against Vela."""
