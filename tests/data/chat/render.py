#!/usr/bin/env python3
"""Writes the expected renderings of the chat templates added here (qwen3,
phi-3.5-mini) with real Jinja2, set up the way Hugging Face transformers
renders chat templates (apply_chat_template): an ImmutableSandboxedEnvironment
with trim_blocks and lstrip_blocks, the loopcontrols extension, a
raise_exception global and a tojson filter with ensure_ascii=False; the
variables are the messages (and tools) of a messages file, add_generation_prompt,
the config's bos_token and eos_token (when not null), and the extra keyword
arguments of the case (chat_template_kwargs).

    python3 tests/data/chat/render.py      # from the repository's root; needs python3-jinja2

The cases are the rows of renderings.tsv; each one's output is written as the
file it names, byte for byte (no newline added). test_jinja.c and tests/cli/chat_template.sh compare snug's renderings
with them. Made with Jinja2 3.1.6 (Debian's python3-jinja2).
"""
import json
import os

import jinja2
import jinja2.ext
import jinja2.sandbox

HERE = os.path.dirname(os.path.abspath(__file__))



def cases():
    """The rows of renderings.tsv: (output, config, messages file, add_generation_prompt, kwargs)."""
    with open(os.path.join(HERE, "renderings.tsv"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            out, config, messages, prompt, kwargs = line.rstrip("\n").split("\t")
            yield out, config, messages, prompt == "1", {} if kwargs == "-" else json.loads(kwargs)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def token(config, key):
    v = config.get(key)
    return v.get("content") if isinstance(v, dict) else v


def main():
    env = environment()
    for out, name, messages_file, prompt, kwargs in cases():
        with open(os.path.join(HERE, name + ".tokenizer_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        with open(os.path.join(HERE, messages_file), encoding="utf-8") as f:
            data = json.load(f)
        variables = {"messages": data["messages"] if isinstance(data, dict) else data,
                     "add_generation_prompt": prompt}
        if isinstance(data, dict) and "tools" in data:
            variables["tools"] = data["tools"]
        for key in ("bos_token", "eos_token"):
            if token(config, key) is not None:
                variables[key] = token(config, key)
        variables.update(kwargs)
        text = env.from_string(config["chat_template"]).render(**variables)
        with open(os.path.join(HERE, out), "w", encoding="utf-8", newline="") as f:
            f.write(text)
        print(f"{out}: {len(text.encode('utf-8'))} bytes")


if __name__ == "__main__":
    main()
