"""Chat format of Guild's demo model (ChatML / Qwen style, no default system prompt).

A conversation renders as
    <|im_start|>system\n{system}<|im_end|>\n          (only if a system message is given)
    <|im_start|>user\n{question}<|im_end|>\n
    <|im_start|>assistant\n{answer}<|im_end|>\n
and generation is prompted with "<|im_start|>assistant\n"; the model ends its
turn with <|im_end|> (the GGUF's EOS token).
"""

EOT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [EOT, IM_START, IM_END]  # ids 0, 1, 2 in our tokenizer

# HF-style Jinja chat template (stored as tokenizer.chat_template in the GGUF and
# tokenizer_config.json). One line, so no whitespace-control surprises in any
# Jinja implementation (@huggingface/jinja, jinja2, minja).
CHAT_TEMPLATE = (
    r"{% for message in messages %}"
    r"{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    r"{% endfor %}"
    r"{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def render_chat(messages, add_generation_prompt=False):
    """Pure-Python equivalent of CHAT_TEMPLATE (checked against jinja2 in tests)."""
    out = []
    for m in messages:
        out.append(IM_START + m["role"] + "\n" + m["content"] + IM_END + "\n")
    if add_generation_prompt:
        out.append(IM_START + "assistant\n")
    return "".join(out)


if __name__ == "__main__":
    # self-check against jinja2 when available
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What does dog mean?"},
            {"role": "assistant", "content": "A dog is an animal."}, {"role": "user", "content": "Thanks!"}]
    try:
        import jinja2
        t = jinja2.Environment().from_string(CHAT_TEMPLATE)
        for gen in (False, True):
            a = t.render(messages=msgs, add_generation_prompt=gen)
            b = render_chat(msgs, gen)
            assert a == b, (a, b)
        print("chat template OK (jinja2 == render_chat)")
    except ImportError:
        print("jinja2 not installed; skipped")
    print(repr(render_chat(msgs[1:2], True)))
