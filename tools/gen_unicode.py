#!/usr/bin/env python3
"""gen_unicode.py: writes the Unicode tables of snug's NFC normalizer.

    tools/gen_unicode.py            (from the repository root)

Writes
  src/unicode_data.c           canonical decompositions (full, canonically
                               ordered), canonical combining classes, the
                               composition pairs (primary composites: the
                               composition exclusions, singletons and
                               non-starter decompositions left out) and which
                               code points are NFC boundaries;
  tests/data/unicode/nfc.txt   test vectors: every code point whose NFC differs
                               from itself or that has a decomposition (a
                               sample of the Hangul syllables), pseudo-random
                               sequences of letters and combining marks, and a
                               few long runs of marks, each with its NFC.

Everything comes from Python's unicodedata module; its Unicode version is
written into both files. Hangul syllables are left out of the tables (their
decomposition and composition are algorithmic, in src/unicode.c). Output
does not depend on time or randomness (a fixed-seed generator picks the
sequences), so running it again with the same Python gives the same files.
"""
import os
import random
import sys
import unicodedata as ud

MAX_CP = 0x110000
SHIFT = 7                      # the two-stage table's block size is 1 << SHIFT
S_BASE, S_COUNT = 0xAC00, 11172  # Hangul syllables: algorithmic

FLAG_FIRST = 1    # starts a composition pair
FLAG_SECOND = 2   # ends a composition pair
FLAG_BOUNDARY = 4  # ccc 0, unchanged by NFC, ends no pair: text before it normalizes apart


def is_hangul_syllable(cp):
    return S_BASE <= cp < S_BASE + S_COUNT


def canonical_mapping(c):
    """The single-level canonical decomposition of c, or None."""
    d = ud.decomposition(c)
    if not d or d.startswith('<'):
        return None
    return [int(x, 16) for x in d.split()]


def utf8_len(cps):
    return len(''.join(map(chr, cps)).encode('utf-8'))


def build():
    # (ccc, flags, decomposition); record 0 is the common case: nothing to do
    records = [(0, FLAG_BOUNDARY, ())]
    record_of = {records[0]: 0}
    props = [0] * MAX_CP
    pairs = {}
    for cp in range(MAX_CP):
        if 0xD800 <= cp < 0xE000 or is_hangul_syllable(cp):
            continue
        c = chr(cp)
        m = canonical_mapping(c)
        # a primary composite: two code points, and NFC keeps it (so it is not a
        # composition exclusion, a singleton or a non-starter decomposition)
        if m and len(m) == 2 and ud.normalize('NFC', c) == c:
            pairs[(m[0], m[1])] = cp
    firsts = {a for a, _ in pairs}
    seconds = {b for _, b in pairs}
    # Hangul jamo V and T end algorithmic pairs (L+V, LV+T): not boundaries
    seconds |= set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    for cp in range(MAX_CP):
        if 0xD800 <= cp < 0xE000 or is_hangul_syllable(cp):
            continue
        c = chr(cp)
        ccc = ud.combining(c)
        decomp = ()
        if canonical_mapping(c):
            decomp = tuple(ord(x) for x in ud.normalize('NFD', c))
        flags = (FLAG_FIRST if cp in firsts else 0) | (FLAG_SECOND if cp in seconds else 0)
        if ccc == 0 and ud.normalize('NFC', c) == c and cp not in seconds:
            flags |= FLAG_BOUNDARY
        rec = (ccc, flags, decomp)
        if rec not in record_of:
            record_of[rec] = len(records)
            records.append(rec)
        props[cp] = record_of[rec]
    return records, props, pairs


def check(records, props, pairs):
    """The bounds src/unicode.c relies on."""
    grow_bytes = grow_cps = 0.0
    for cp in range(MAX_CP):
        if 0xD800 <= cp < 0xE000:
            continue
        n = utf8_len([cp])
        if is_hangul_syllable(cp):
            d = [ord(x) for x in ud.normalize('NFD', chr(cp))]
        else:
            d = list(records[props[cp]][2]) or [cp]
        grow_bytes = max(grow_bytes, utf8_len(d) / n)
        grow_cps = max(grow_cps, len(d) / n)
    assert grow_bytes <= 3, grow_bytes     # SNUG_NFC_BYTES_PER_BYTE
    assert grow_cps <= 2, grow_cps         # SNUG_NFC_CPS_PER_BYTE
    for (a, b), c in pairs.items():        # composing never makes text longer
        assert utf8_len([c]) <= utf8_len([a]) + utf8_len([b])
    for cp in range(0x80):                 # ASCII: boundaries, the fast path
        assert records[props[cp]][1] & FLAG_BOUNDARY and records[props[cp]][0] == 0
    assert max(len(r[2]) for r in records) <= 4
    return grow_bytes, grow_cps


def stages(props):
    block_of = {}
    stage1, stage2 = [], []
    for start in range(0, MAX_CP, 1 << SHIFT):
        block = tuple(props[start:start + (1 << SHIFT)])
        if block not in block_of:
            block_of[block] = len(stage2) >> SHIFT
            stage2.extend(block)
        stage1.append(block_of[block])
    return stage1, stage2


def numbers(values, per_line=16, fmt='%d'):
    lines = []
    for i in range(0, len(values), per_line):
        lines.append('    ' + ', '.join(fmt % v for v in values[i:i + per_line]) + ',')
    return '\n'.join(lines)


def write_c(path, records, props, pairs, grow):
    stage1, stage2 = stages(props)
    assert max(stage1) < 65536 and len(records) < 65536
    decomp, recs = [], []
    for ccc, flags, d in records:
        recs.append((ccc, flags, len(d), len(decomp)))
        decomp.extend(d)
    assert len(decomp) < 65536
    comp = sorted((a, b, c) for (a, b), c in pairs.items())
    out = []
    out.append('/*\n'
               ' * unicode_data.c: the tables of snug\'s NFC normalizer (src/unicode.c).\n'
               ' *\n'
               ' * GENERATED by tools/gen_unicode.py from Python %s\'s unicodedata\n'
               ' * (Unicode %s); do not edit. Run `tools/gen_unicode.py` to remake it.\n'
               ' *\n'
               ' * A two-stage table maps every code point (Hangul syllables excepted:\n'
               ' * they are algorithmic) to a record: its canonical combining class, its\n'
               ' * full canonical decomposition (canonically ordered) and whether it\n'
               ' * starts or ends a composition pair or is an NFC boundary. The pairs\n'
               ' * are the primary composites, sorted: a code point whose canonical\n'
               ' * mapping has two code points and that NFC keeps (the composition\n'
               ' * exclusions, singletons and non-starter decompositions are left out).\n'
               ' */\n' % (sys.version.split()[0], ud.unidata_version))
    out.append('#include "unicode_impl.h"\n')
    out.append('const char SNUG_UNICODE_VERSION[] = "%s";\n' % ud.unidata_version)
    out.append('/* max bytes of NFD per byte of UTF-8: %.3f; max code points per byte: %.3f */\n'
               % grow)
    out.append('const uint16_t snug_uni_stage1[%d] = {\n%s\n};\n' % (len(stage1), numbers(stage1)))
    out.append('const uint16_t snug_uni_stage2[%d] = {\n%s\n};\n' % (len(stage2), numbers(stage2)))
    out.append('const snug_uni_record snug_uni_records[%d] = {\n%s\n};\n' % (
        len(recs), '\n'.join('    {%d, %d, %d, %d},' % r for r in recs)))
    out.append('const uint32_t snug_uni_decomp[%d] = {\n%s\n};\n' % (
        max(len(decomp), 1), numbers(decomp or [0], 10, '0x%04X')))
    out.append('const snug_uni_pair snug_uni_pairs[%d] = {\n%s\n};\n' % (
        len(comp), '\n'.join('    {0x%04X, 0x%04X, 0x%04X},' % p for p in comp)))
    out.append('const size_t snug_uni_n_pairs = %d;\n' % len(comp))
    with open(path, 'w') as f:
        f.write('\n'.join(out))
    return len(stage1), len(stage2), len(recs), len(decomp), len(comp)


def hexs(s):
    return ' '.join('%04X' % ord(c) for c in s)


def write_vectors(path, records, props):
    rng = random.Random(20240229)
    marks = [cp for cp in range(0x300, 0x10000) if ud.combining(chr(cp))][:400]
    marks += [0x0301, 0x0300, 0x0308, 0x0323, 0x0327, 0x0345, 0x05B0, 0x0F71, 0x0F72, 0x0F80,
              0x1D165, 0x1D16E, 0x093C, 0x0B3E, 0x0BBE, 0x0CD5, 0x0D3E, 0x102E]
    bases = [0x41, 0x45, 0x61, 0x65, 0x6F, 0x75, 0xC5, 0xE9, 0x0391, 0x03B1, 0x03C9, 0x1F00,
             0x0915, 0x0B47, 0x0BC6, 0x0CC6, 0x0D46, 0x1025, 0x1100, 0x1161, 0x11A8, 0xAC00,
             0xAC01, 0x1D157, 0x1D158, 0x212B, 0x2126, 0x0958, 0xFB2C, 0x0344, 0x0F73, 0x4E00]
    lines = ['# NFC test vectors, GENERATED by tools/gen_unicode.py from Python %s\'s unicodedata'
             % sys.version.split()[0],
             '# (Unicode %s). Each line: input code points ; their NFC (hex).' % ud.unidata_version]
    for cp in range(MAX_CP):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        if canonical_mapping(c) or ud.normalize('NFC', c) != c:
            if is_hangul_syllable(cp) and cp % 97:
                continue   # a sample of the 11172 syllables
            lines.append('%s;%s' % (hexs(c), hexs(ud.normalize('NFC', c))))
    for _ in range(3000):
        s = ''
        for _ in range(rng.randint(1, 8)):
            pool = bases if rng.random() < 0.4 else marks
            s += chr(rng.choice(pool))
        lines.append('%s;%s' % (hexs(s), hexs(ud.normalize('NFC', s))))
    for n in (33, 40, 64, 100, 200):   # long runs of marks: sorted by counting, not insertion
        s = chr(rng.choice(bases)) + ''.join(chr(rng.choice(marks)) for _ in range(n))
        lines.append('%s;%s' % (hexs(s), hexs(ud.normalize('NFC', s))))
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return len(lines) - 2


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    records, props, pairs = build()
    grow = check(records, props, pairs)
    sizes = write_c(os.path.join(root, 'src', 'unicode_data.c'), records, props, pairs, grow)
    os.makedirs(os.path.join(root, 'tests', 'data', 'unicode'), exist_ok=True)
    n = write_vectors(os.path.join(root, 'tests', 'data', 'unicode', 'nfc.txt'), records, props)
    print('Unicode %s: stage1 %d, stage2 %d, %d records, %d decomposition code points, '
          '%d pairs; %d test vectors' % ((ud.unidata_version,) + sizes + (n,)))


if __name__ == '__main__':
    main()
