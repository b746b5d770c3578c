#!/usr/bin/python3
"""Compares the parameters of two sgrt checkpoints (.sgg) of one model, per
tensor: relative L2 difference ||a - b|| / ||b||. Exits 1 when one exceeds TOL.

GPT-2's attention key biases (the middle third of "*.attn.c_attn.bias") are
left out: their gradient is 0 but for rounding (a shift of every key moves a
softmax row by a constant), and AdamW turns that noise into steps of the
learning rate's size, differently for every summation order (gpt2_parity.c
does the same).

usage: compare_ckpt.py A.sgg B.sgg TOL [LABEL]   (needs the sgrt package: PYTHONPATH, SGRT_LIBRARY)"""
import sys

import numpy as np
import sgrt

a_path, b_path, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
label = sys.argv[4] if len(sys.argv) > 4 else "%s vs %s" % (a_path, b_path)
a, b = sgrt.Graph.load(a_path), sgrt.Graph.load(b_path)
worst, where, n = 0.0, "", 0
for t in a.parameters:
    va, vb = t.value().astype(np.float64), b[t.name].value().astype(np.float64)
    assert va.shape == vb.shape, (t.name, va.shape, vb.shape)
    if t.name.endswith(".attn.c_attn.bias"):
        third = va.shape[0] // 3
        keep = np.r_[0:third, 2 * third:va.shape[0]]
        va, vb = va[keep], vb[keep]
    ref = np.linalg.norm(vb)
    rel = np.linalg.norm(va - vb) / ref if ref > 0 else np.linalg.norm(va)
    n += 1
    if rel > worst or not where:
        worst, where = rel, t.name
print("%s: %d parameters, worst relative L2 difference %.3e in %s (bar %g)" % (label, n, worst, where, tol))
sys.exit(0 if n > 0 and worst <= tol else 1)
