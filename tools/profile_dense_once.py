import sys, torch
sys.path.insert(0, "python")
import blockattn
B, S, H, D = 4, 4096, 32, 64
q, k, v = (torch.randn(B, H, S, D, dtype=torch.float16, device="cuda") for _ in range(3))
for _ in range(2):
    blockattn.attention(q, k, v, causal=True)
torch.cuda.synchronize()
