"""Replies as real servers shape them, made what the loop expects.

- `reasoning`: a reasoning model's thinking told apart from its answer;
- `text_calls`: tool calls written as text, one parser per format;
- `lenient`: JSON as models write it (single quotes, trailing commas);
- `normaliser`: a whole reply (`normalise`) or a stream (`ReplyStream`)
  put through all of the above.
"""
