#!/usr/bin/env python3
"""make-tokenizer-seeds.py: writes the seed corpus of fuzz_tokenizer.c into
tests/fuzz/tokenizer/ (see that harness for what the first byte of an input
means):
  json-*.json   small tokenizer.json files of every kind snug reads;
  near-*.json   the same, each breaking one rule;
  text-*-M.txt  texts for the real tokenizer M (s: tok512.bin, g: GPT-2,
                q: Qwen2), the second byte holding add_special (bit 0) and
                parse_special (bit 1);
  native-*, near-*.{model,bin,gguf}  small SentencePiece, llama2.c and GGUF
                vocabularies (P, L, F), and ones breaking one rule.

    tests/fuzz/make-tokenizer-seeds.py

Output does not depend on time or randomness; `make test` replays every seed.
"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'tokenizer')


def w(name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(OUT, name), 'wb') as f:
        f.write(data)


def copy(o):
    return json.loads(json.dumps(o))


def byte_level_vocab(extra):
    """Printable ASCII and U+0120 (GPT-2's space), then extra tokens."""
    v = {chr(c): i for i, c in enumerate(range(33, 127))}
    v['\u0120'] = len(v)
    for t in extra:
        v[t] = len(v)
    return v


def added(i, content):
    return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


LLAMA3_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
                "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def main():
    os.makedirs(OUT, exist_ok=True)
    vocab = byte_level_vocab(["he", "ll", "llo", "hello", "\u0120w", "or", "\u0120wor"])
    bl = {"version": "1.0", "added_tokens": [added(len(vocab), "<|end|>")], "normalizer": None,
          "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
              {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX}, "behavior": "Isolated",
               "invert": False},
              {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
               "use_regex": False}]},
          "post_processor": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
          "model": {"type": "BPE", "ignore_merges": True, "vocab": vocab,
                    "merges": ["h e", "l l", "ll o", "he llo", "\u0120 w", "o r", "\u0120w or"]}}
    w('json-byte-level.json', 'j' + json.dumps(bl))
    b2 = copy(bl)
    b2["normalizer"] = {"type": "NFC"}
    b2["pre_tokenizer"]["pretokenizers"].insert(0, {"type": "Digits", "individual_digits": True})
    b2["model"]["merges"] = [m.split(' ') for m in b2["model"]["merges"]]
    w('json-nfc-digits-pairs.json', 'j' + json.dumps(b2))
    b3 = copy(bl)
    b3["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                           "use_regex": True}
    w('json-gpt2-bytelevel.json', 'j' + json.dumps(b3))

    sv = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for i in range(256):
        sv["<0x%02X>" % i] = 3 + i
    for t in ["\u2581", "a", "b", "\u2581a", "ab", "\u2581ab", "c"]:
        sv[t] = len(sv)
    sp = {"version": "1.0", "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
          "normalizer": {"type": "Sequence", "normalizers": [
              {"type": "Prepend", "prepend": "\u2581"},
              {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
          "pre_tokenizer": None,
          "post_processor": {"type": "TemplateProcessing",
                             "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                        {"Sequence": {"id": "A", "type_id": 0}}],
                             "pair": [], "special_tokens": {}},
          "decoder": {"type": "Sequence", "decoders": [
              {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
              {"type": "ByteFallback"}, {"type": "Fuse"},
              {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
          "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": True, "fuse_unk": True,
                    "vocab": sv, "merges": ["\u2581 a", "a b", "\u2581a b"]}}
    w('json-sentencepiece.json', 'j' + json.dumps(sp))
    s2 = copy(sp)
    s2["normalizer"] = None
    s2["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                           "split": False}
    s2["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                     "split": False}
    w('json-metaspace.json', 'j' + json.dumps(s2))

    n1 = copy(sp)
    n1["model"]["vocab"]["<0xZZ>"] = 400
    w('near-bad-byte-token.json', 'j' + json.dumps(n1))
    n2 = copy(bl)
    n2["model"]["merges"].append("q zz")
    w('near-merge-unknown.json', 'j' + json.dumps(n2))
    n3 = copy(bl)
    n3["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"
    w('near-bad-regex.json', 'j' + json.dumps(n3))
    n4 = copy(bl)
    n4["model"]["vocab"]["dup"] = 3
    w('near-duplicate-id.json', 'j' + json.dumps(n4))
    n5 = copy(sp)
    n5["normalizer"] = {"type": "NFKC"}
    w('near-nfkc.json', 'j' + json.dumps(n5))

    texts = {
        'text-ascii': b'Hello world! 1234567 and 3.14159, it\'s "quoted".\n\n\tTabs  and  spaces  ',
        'text-unicode': ('caf\u00e9 cafe\u0301 \u1112\u1161\u11ab \u212b \u0958 na\u00efve '
                         '\u4e2d\u6587 \U0001f999 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 '
                         'a\u0301\u0316').encode(),
        'text-invalid-utf8': (b'\xff\xfe invalid \xc3 cut \xe2\x82 \xed\xa0\x80 surrogate '
                              b'\xf4\x90\x80\x80 e\xff\xcc\x81'),
        'text-special': b'<s>[INST] hi [/INST]</s> <|endoftext|><|im_start|>user\nhi<|im_end|> <unk>',
        'text-spaces': b'\xe2\x96\x81 leading \xe2\x96\x81\xe2\x96\x81 marks   ',
    }
    for name, t in texts.items():
        for mode, flags in (('s', 0), ('g', 2), ('q', 1)):
            w('%s-%s.txt' % (name, mode), mode.encode() + bytes([0x30 + flags]) + t)
    w('text-empty-q.txt', b'q0')
    native_seeds()


def pb_varint(v):
    out = b''
    while True:
        c = v & 0x7F
        v >>= 7
        if v:
            out += bytes([c | 0x80])
        else:
            return out + bytes([c])


def pb_len(field, data):
    return pb_varint(field << 3 | 2) + pb_varint(len(data)) + data


def pb_int(field, v):
    return pb_varint(field << 3) + pb_varint(v & (2**64 - 1))


def spm_model(byte_piece=b'<0x00>', model_type=2):
    pieces = [(b'<unk>', 2), (b'<s>', 3), (b'</s>', 3)]
    pieces += [(b'<0x%02X>' % i if i else byte_piece, 6) for i in range(256)]
    pieces += [(t.encode(), 1) for t in ['\u2581', 'a', 'b', '\u2581a', 'ab', '\u2581ab']]
    pieces += [(b'<tool>', 4)]
    out = b''
    for i, (text, typ) in enumerate(pieces):
        p = pb_len(1, text) + pb_varint(2 << 3 | 5) + struct.pack('<f', -float(i)) + pb_int(3, typ)
        out += pb_len(1, p)
    trainer = pb_int(3, model_type) + pb_int(35, 1) + pb_int(40, 0) + pb_int(41, 1) + pb_int(42, 2) + pb_int(43, -1)
    norm = pb_len(1, b'identity') + pb_int(3, 1) + pb_int(4, 0)
    return out + pb_len(2, trainer) + pb_len(3, norm)


def llama2c(byte3=b'<0x00>'):
    toks = [b'<unk>', b'\n<s>\n', b'\n</s>\n'] + [b'<0x%02X>' % i if i else byte3 for i in range(256)]
    toks += [b' ', b'a', b' a', b'b', b'ab', b' ab']
    out = struct.pack('<i', 8)
    for i, t in enumerate(toks):
        out += struct.pack('<fi', 0.0 if i < 259 else -float(i), len(t)) + t
    return out


def gguf(model, tokens, types, scores=None, merges=None, pre=None):
    def s(x):
        return struct.pack('<Q', len(x)) + x
    kv = [(b'tokenizer.ggml.model', 8, s(model))]
    if pre:
        kv.append((b'tokenizer.ggml.pre', 8, s(pre)))
    kv.append((b'tokenizer.ggml.tokens', 9, struct.pack('<IQ', 8, len(tokens)) + b''.join(s(t) for t in tokens)))
    kv.append((b'tokenizer.ggml.token_type', 9, struct.pack('<IQ', 5, len(types)) + struct.pack('<%di' % len(types), *types)))
    if scores is not None:
        kv.append((b'tokenizer.ggml.scores', 9, struct.pack('<IQ', 6, len(scores)) + struct.pack('<%df' % len(scores), *scores)))
    if merges is not None:
        kv.append((b'tokenizer.ggml.merges', 9, struct.pack('<IQ', 8, len(merges)) + b''.join(s(m) for m in merges)))
    kv.append((b'tokenizer.ggml.bos_token_id', 4, struct.pack('<I', 1)))
    out = b'GGUF' + struct.pack('<IQQ', 3, 0, len(kv))
    for k, t, v in kv:
        out += s(k) + struct.pack('<I', t) + v
    return out + b'\0' * (-len(out) % 32)


def native_seeds():
    w('native-spm.model', b'P' + spm_model())
    w('near-spm-bad-byte.model', b'P' + spm_model(byte_piece=b'<0xZZ>'))
    w('near-spm-unigram.model', b'P' + spm_model(model_type=1))
    w('native-llama2c.bin', b'L' + llama2c())
    w('near-llama2c-bad-byte.bin', b'L' + llama2c(byte3=b'<0x-1>'))
    sp = ['<unk>', '<s>', '</s>', '\u2581', 'a', '\u2581a', 'b', 'ab']
    w('native-llama.gguf', b'F' + gguf(b'llama', [t.encode() for t in sp], [2, 3, 3, 1, 1, 1, 1, 1],
                                      scores=[0, 0, 0, 0, 0, -1, -2, -3]))
    bl = ['<|endoftext|>', 'a', 'b', '\u0120', 'ab', '\u0120a', '\u0120ab', 'c']
    w('native-gpt2.gguf', b'F' + gguf(b'gpt2', [t.encode() for t in bl], [3, 1, 1, 1, 1, 1, 1, 1],
                                     merges=[m.encode() for m in ['\u0120 a', 'a b', '\u0120a b']],
                                     pre=b'qwen2'))
    w('near-gguf-merge.gguf', b'F' + gguf(b'gpt2', [t.encode() for t in bl], [3, 1, 1, 1, 1, 1, 1, 1],
                                         merges=[m.encode() for m in ['\u0120 a', 'a q']], pre=b'gpt-2'))


if __name__ == '__main__':
    main()
