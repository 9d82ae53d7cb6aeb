"""yokebot benchmarks (not part of the test suite). Run them all with `python -m bench`, one with
`python -m bench.overhead` etc.; `--quick` for a short run. See bench/README.md."""
