"""`loopwire doctor`: probe an OpenAI-compatible endpoint the way loopwire
will use it, and say whether loopwire will work with it, and how.

- `options`: the subcommand's options and help;
- `checks`: the endpoint (`Target`), what one probe found (`Check`), and
  all of it (`Findings`);
- `listing`: the model list, over plain HTTP (and an endpoint that is down);
- `probes`: the calls, in order, through the real `OpenAIClient`;
- `servers`: which kind of server answered, so which profile to name;
- `verdicts`: works / works with these settings / won't work, and why;
- `table`: the report as text;
- `command`: the subcommand itself (settings in, report out, exit code).
"""
