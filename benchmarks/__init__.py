"""`make bench`: loopwire measured on a live server against the issue's targets.

`python -m benchmarks` (`__main__.py`) runs the measurements, one module
each: `turn_cost`, `agent_runs`, `frame_rate`, `token_pace`,
`session_memory`, `idle_memory` and `stop_latency` on the processes
`harness` starts, `agent_loop` and `sources` in the bench's own process.
`harness` starts the fake LLM server (`fake_llm`), the bare echo baseline
(`echo`) and loopwire (`python -m backend serve`, or `serve` with one extra
tool). `clients` speaks to them, `checks` validates every run, `meter` and
`procfs` read CPU and memory from `/proc`, `profile` samples the server
with py-spy; `report` (with `targets`, `sections` and `formats`) and `plot`
write docs/benchmarks.md and docs/benchmarks.png. `cluster` measures
several instances (docs/scaling.md).
"""
