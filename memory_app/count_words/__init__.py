"""`count_words`: a tool that counts a text's lines and words, the example of the notepad's sandbox
API (seed 000): after each chunk of a long text it appends a progress line to the notepad.

Slots: `prompts` (its description and schema), `tools`, `feature`. It has none of the others:
no `models`, `services`, `selectors` or `admin`, as it stores nothing of its own and reads
nothing stored (its only write is the notepad's append, through the notepad's sandbox API); no
`context`, as it adds nothing to the prompt but its tool definition (it is offered with the
notepad); no `scripted` rule, as the scripted model calls it with its generic `tool NAME {...}`.
"""
