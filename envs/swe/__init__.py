"""argym/SWE-v0: repository-level tasks in SWE-bench's instance format.

`env` (the env), `tools` (the editing tools and their OpenAI schemas),
`workspace` (a repository per episode, per sandbox backend), `grading`
(fresh-sandbox grading with swebench's log parsers), `instances` (the JSONL
reader and the shipped instances), `project` (base repositories built from
shipped PyPI sdists) and `synth` (SWE-smith-style task synthesis).
"""
