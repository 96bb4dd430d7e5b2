"""Instruments for tests and self-benchmarks, not for serving: `refserver`, a streaming server whose
timing is known (`python -m firstlight.testing.refserver --ttft-ms 50 --itl-ms 10`)."""
