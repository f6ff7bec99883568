#!/usr/bin/env python3
"""Calibration (not a golden): llama.cpp's own error on the MLX 4-bit SmolLM2 weights vs mlx_lm.

MLX affine 4-bit (w = s·q + b, group 64) is exactly GGUF Q4_1 (w = d·q + m, group 32) with each
group's scale/bias repeated; the bf16 scales/biases convert to f16 exactly. This copies the Q4_1
GGUF, overwrites every Q4_1 tensor with the MLX copy's weights (Q/K rows permuted the GGUF way),
the norms with the MLX norms, and the (Q8_0) embedding with the MLX 4-bit embedding requantized
to Q8_0 (the only inexact part), then runs llama.cpp teacher-forced on
tests/golden/model/smollm2_mlx_q4_greedy.json and prints its error vs mlx_lm. Measured
(llama-cpp-python 0.3.x): worst |Δlogit|/max|logit| 1.11e-1, p99 5.8e-2, argmax 304/320 — the
basis of SmolLM2MlxQ4Parity.FastPathMatchesMlxLm's bound.

usage: .venv-oracle/bin/python scripts/make_parity_goldens_mlx_llamacpp.py [Q4_1.gguf] [MLX_DIR]
"""
import os, sys, shutil
import numpy as np
import mlx.core as mx
from gguf import GGUFReader
from llama_cpp import Llama
import json

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
M = os.path.expanduser("~/.cache/rapid-mlx/models/smollm2-135m-instruct")
src = sys.argv[1] if len(sys.argv) > 1 else M + "/SmolLM2-135M-Instruct.Q4_1.gguf"
mdir = sys.argv[2] if len(sys.argv) > 2 else M + "/mlx-q4"
out = "/tmp/smollm2_mlx_q4_as_q4_1.gguf"
shutil.copy(src,out)
# load MLX weights via mlx (bf16 support)
W={k: np.array(v.astype(mx.float32)) if v.dtype!=mx.uint32 else np.array(v) for k,v in mx.load(mdir+"/model.safetensors").items()}
r=GGUFReader(out,'r+')
nh,nkv=9,3
def perm(a,n):
    return a.reshape(n,2,a.shape[0]//n//2,*a.shape[1:]).swapaxes(1,2).reshape(a.shape)
names={'attn_q':'self_attn.q_proj','attn_k':'self_attn.k_proj','attn_v':'self_attn.v_proj','attn_output':'self_attn.o_proj',
'ffn_gate':'mlp.gate_proj','ffn_up':'mlp.up_proj','ffn_down':'mlp.down_proj','attn_norm':'input_layernorm','ffn_norm':'post_attention_layernorm'}
def unpack(base):
    q=W[base+'.weight']; s=W[base+'.scales']; b=W[base+'.biases']
    rows=q.shape[0]; n=q.shape[1]*8
    nib=np.zeros((rows,n),np.uint8)
    for k in range(8): nib[:,k::8]=(q>>(4*k))&15
    return nib,s,b
for t in r.tensors:
    nm=t.name
    if nm=='output_norm.weight': hf='model.norm.weight'
    elif nm=='token_embd.weight': hf='model.embed_tokens'
    else:
        _,L,part,_w=nm.split('.'); hf=f'model.layers.{L}.{names[part]}'
    if t.tensor_type.name=='F32':
        t.data[...]=W[hf if hf.endswith('weight') else hf+'.weight'].reshape(t.data.shape); continue
    nib,s,b=unpack(hf)
    part=nm.split('.')[2] if nm.startswith('blk') else ''
    if part in('attn_q','attn_k'):
        n=nh if part=='attn_q' else nkv
        nib,s,b=perm(nib,n),perm(s,n),perm(b,n)
    rows,n=nib.shape
    if t.tensor_type.name=='Q4_1':
        blk=nib.reshape(rows,n//32,32)
        qs=(blk[:,:,:16]|(blk[:,:,16:]<<4)).astype(np.uint8)
        d=np.repeat(s,2,axis=1).astype(np.float16); m=np.repeat(b,2,axis=1).astype(np.float16)
        rec=np.zeros((rows,n//32),dtype=[('d','<f2'),('m','<f2'),('qs','u1',16)])
        rec['d']=d; rec['m']=m; rec['qs']=qs
        t.data[...]=rec.view(np.uint8).reshape(t.data.shape)
    else:  # Q8_0 embedding: requantize the 4-bit values
        v=nib.astype(np.float32)*np.repeat(s,64,axis=1)+np.repeat(b,64,axis=1)
        blk=v.reshape(rows,n//32,32); amax=np.abs(blk).max(-1); d=(amax/127).astype(np.float32)
        q=np.round(blk/np.where(d==0,1,d)[...,None]).astype(np.int8)
        rec=np.zeros((rows,n//32),dtype=[('d','<f2'),('qs','i1',32)]); rec['d']=d.astype(np.float16); rec['qs']=q
        t.data[...]=rec.view(np.uint8).reshape(t.data.shape)
r = None
g = json.load(open(os.path.join(ROOT, "tests", "golden", "model", "smollm2_mlx_q4_greedy.json")))
probe = g["probe_ids"]
llm = Llama(model_path=out, n_ctx=512, n_batch=512, n_threads=2, logits_all=True, verbose=False)
ws, same, tot = [], 0, 0
for c in g["cases"]:
    ids = c["prompt_ids"]; toks = [s["token"] for s in c["steps"]]
    llm.reset(); llm.eval(ids + toks[:-1])
    sc = np.array(llm.scores[:len(ids) + len(toks) - 1], dtype=np.float64)
    for k, s in enumerate(c["steps"]):
        row = sc[len(ids) - 1 + k]; mxl = s["max_abs_logit"]
        ws.append(max(abs(row[i] - v) / mxl for i, v in zip(s["top_ids"] + probe, s["top_logits"] + s["probe_logits"])))
        same += int(np.argmax(row)) == s["token"]; tot += 1
print(f"llama.cpp vs mlx_lm: worst {max(ws):.3g}, p99 {np.percentile(ws, 99):.3g}, argmax {same}/{tot}")
