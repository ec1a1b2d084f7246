#!/usr/bin/env python3
"""gguf_to_hf.py: writes a small GGUF model (F32, F16 or Q8_0 tensors) as a
Hugging Face directory (config.json + model.safetensors in F32), so that the
float64 reference model (tests/support/ref_model.c) can run a model that
llama.cpp made and be checked against llama.cpp's own outputs.

    python3 tests/support/gguf_to_hf.py MODEL.gguf OUT_DIR

Architectures: qwen2, qwen3 and phi3, which llama.cpp stores in Hugging
Face row order (no q/k permutation; their rope is NeoX, rotate_half); others
are refused. phi3: attn_qkv and ffn_up (gate rows, then up rows) become the
fused qkv_proj and gate_up_proj; rope.dimension_count / key_length becomes
partial_rotary_factor; rope_factors_short/long (when present) become a
"longrope" rope_scaling with the original context length. A model without
output.weight is written tied. Plain Python 3 (struct), no numpy: for test
fixtures of a few MB, not real models. Not part of make test.
"""
import array
import json
import math
import os
import struct
import sys

GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
SCALAR = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from('<' + fmt, self.data, self.pos)
        self.pos += struct.calcsize('<' + fmt)
        return v

    def string(self):
        (n,) = self.take('Q')
        s = self.data[self.pos:self.pos + n].decode('utf-8', 'replace')
        self.pos += n
        return s

    def value(self, t):
        if t in SCALAR:
            return self.take(SCALAR[t])[0]
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take('IQ')
            return [self.value(et) for _ in range(n)]
        raise ValueError('unknown GGUF value type %d' % t)


def read_gguf(path):
    """Returns (metadata dict, {name: (dims, ggml type, bytes)})."""
    with open(path, 'rb') as f:
        data = f.read()
    r = Reader(data)
    if data[:4] != b'GGUF':
        raise ValueError('%s: not a GGUF file' % path)
    r.pos = 4
    version, n_tensors, n_kv = r.take('IQQ')
    if version < 2:
        raise ValueError('%s: GGUF version %d' % (path, version))
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        (t,) = r.take('I')
        meta[key] = r.value(t)
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        (nd,) = r.take('I')
        dims = r.take('Q' * nd)
        t, off = r.take('IQ')
        infos.append((name, dims, t, off))
    align = meta.get('general.alignment', 32)
    start = (r.pos + align - 1) // align * align
    tensors = {}
    for name, dims, t, off in infos:
        count = 1
        for d in dims:
            count *= d
        if t == GGML_F32:
            size = 4 * count
        elif t == GGML_F16:
            size = 2 * count
        elif t == GGML_Q8_0:
            if dims[0] % 32:
                raise ValueError('%s: Q8_0 rows of %d values' % (name, dims[0]))
            size = count // 32 * 34
        else:
            raise ValueError('%s: ggml type %d not supported' % (name, t))
        tensors[name] = (dims, t, data[start + off:start + off + size])
    return meta, tensors


def dequantize(dims, t, raw):
    """The tensor's values as an array('f'), ne[0] fastest (row-major rows of ne[0])."""
    if t == GGML_F32:
        return array.array('f', raw)
    if t == GGML_F16:
        return array.array('f', [v for (v,) in struct.iter_unpack('<e', raw)])
    out = array.array('f')
    for block in struct.iter_unpack('<e32b', raw):  # Q8_0: f16 scale d, 32 int8 q; d * q
        d = block[0]
        out.extend([d * q for q in block[1:]])
    return out


def hf_name(arch, name):
    if name == 'token_embd.weight':
        return 'model.embed_tokens.weight'
    if name == 'output_norm.weight':
        return 'model.norm.weight'
    if name == 'output.weight':
        return 'lm_head.weight'
    parts = name.split('.')
    if parts[0] != 'blk' or len(parts) != 4:
        return None
    layer, what, kind = parts[1], parts[2], parts[3]
    table = {
        'attn_norm': 'input_layernorm', 'attn_q': 'self_attn.q_proj', 'attn_k': 'self_attn.k_proj',
        'attn_v': 'self_attn.v_proj', 'attn_q_norm': 'self_attn.q_norm',
        'attn_k_norm': 'self_attn.k_norm', 'attn_qkv': 'self_attn.qkv_proj',
        'attn_output': 'self_attn.o_proj', 'ffn_norm': 'post_attention_layernorm',
        'ffn_gate': 'mlp.gate_proj', 'ffn_up': 'mlp.gate_up_proj' if arch == 'phi3' else 'mlp.up_proj',
        'ffn_down': 'mlp.down_proj',
    }
    if what not in table:
        return None
    return 'model.layers.%s.%s.%s' % (layer, table[what], kind)


def f32_round(x):
    """The shortest decimal that reads back as the same float32 (1e-06, not 9.99999997e-07)."""
    want = struct.unpack('<f', struct.pack('<f', x))[0]
    for digits in range(1, 10):
        s = float('%.*g' % (digits, x))
        if struct.unpack('<f', struct.pack('<f', s))[0] == want:
            return s
    return x


def config_for(arch, meta, tensors):
    g = lambda key, dflt=None: meta.get('%s.%s' % (arch, key), dflt)
    hidden, heads = g('embedding_length'), g('attention.head_count')
    head_dim = g('attention.key_length', hidden // heads)
    vocab = g('vocab_size') or tensors['token_embd.weight'][0][1]
    cfg = {
        'architectures': [{'qwen2': 'Qwen2ForCausalLM', 'qwen3': 'Qwen3ForCausalLM',
                           'phi3': 'Phi3ForCausalLM'}[arch]],
        'model_type': arch,
        'hidden_act': 'silu',
        'hidden_size': hidden,
        'intermediate_size': g('feed_forward_length'),
        'num_hidden_layers': g('block_count'),
        'num_attention_heads': heads,
        'num_key_value_heads': g('attention.head_count_kv', heads),
        'head_dim': head_dim,
        'vocab_size': vocab,
        'rms_norm_eps': f32_round(g('attention.layer_norm_rms_epsilon')),
        'rope_theta': g('rope.freq_base', 10000.0),
        'max_position_embeddings': g('context_length'),
        'rope_scaling': None,
        'tie_word_embeddings': 'output.weight' not in tensors,
        'torch_dtype': 'float32',
    }
    if 'tokenizer.ggml.bos_token_id' in meta:
        cfg['bos_token_id'] = meta['tokenizer.ggml.bos_token_id']
    if 'tokenizer.ggml.eos_token_id' in meta:
        cfg['eos_token_id'] = meta['tokenizer.ggml.eos_token_id']
    if arch in ('qwen2', 'qwen3'):
        cfg['use_sliding_window'] = False
    if arch == 'qwen3':
        cfg['attention_bias'] = 'blk.0.attn_q.bias' in tensors
    if arch == 'phi3':
        rope_dim = g('rope.dimension_count', head_dim)
        cfg['partial_rotary_factor'] = rope_dim / head_dim
        if int(head_dim * cfg['partial_rotary_factor']) != rope_dim:
            raise ValueError('rope.dimension_count %d is no fraction of head_dim %d' % (rope_dim, head_dim))
        cfg['sliding_window'] = g('attention.sliding_window')
        orig = g('rope.scaling.original_context_length', g('context_length'))
        cfg['original_max_position_embeddings'] = orig
        if 'rope_factors_long.weight' in tensors:
            short = tensors.get('rope_factors_short.weight', tensors['rope_factors_long.weight'])
            cfg['rope_scaling'] = {
                'type': 'longrope',
                'short_factor': list(dequantize(*short)),
                'long_factor': list(dequantize(*tensors['rope_factors_long.weight'])),
            }
            if g('rope.scaling.attn_factor') is not None:
                cfg['rope_scaling']['attention_factor'] = g('rope.scaling.attn_factor')
    return cfg


def write_safetensors(path, named):
    """named: list of (name, shape, array('f'))."""
    header, off = {'__metadata__': {'format': 'pt'}}, 0
    for name, shape, values in named:
        n = 4 * len(values)
        header[name] = {'dtype': 'F32', 'shape': list(shape), 'data_offsets': [off, off + n]}
        off += n
    text = json.dumps(header, separators=(',', ':')).encode()
    text += b' ' * (-len(text) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)))
        f.write(text)
        for _, _, values in named:
            f.write(values.tobytes())


def convert(gguf_path, out_dir):
    meta, tensors = read_gguf(gguf_path)
    arch = meta.get('general.architecture')
    if arch not in ('qwen2', 'qwen3', 'phi3'):
        raise ValueError('%s: architecture %r not supported (qwen2, qwen3, phi3)' % (gguf_path, arch))
    cfg = config_for(arch, meta, tensors)
    named = []
    for name, (dims, t, raw) in tensors.items():
        if name.startswith('rope_factors_'):
            continue
        hf = hf_name(arch, name)
        if hf is None:
            raise ValueError('%s: tensor %s has no Hugging Face name here' % (gguf_path, name))
        shape = list(reversed(dims))  # GGUF ne[0] is the number of columns
        named.append((hf, shape, dequantize(dims, t, raw)))
    named.sort()
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=1)
    write_safetensors(os.path.join(out_dir, 'model.safetensors'), named)
    return cfg


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit('usage: gguf_to_hf.py MODEL.gguf OUT_DIR')
    convert(sys.argv[1], sys.argv[2])
