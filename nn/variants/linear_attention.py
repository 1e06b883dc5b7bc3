"""Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs").

Replace exp(q·k) by a kernel φ(q)·φ(k) with a positive feature map, φ(x) = elu(x) + 1:

    o_i = Σ_{j≤i} φ(q_i)·φ(k_j) v_j / Σ_{j≤i} φ(q_i)·φ(k_j)
        = φ(q_i)ᵀ S_i / φ(q_i)ᵀ z_i,     S_i = Σ_{j≤i} φ(k_j) v_jᵀ  (d×d_v),  z_i = Σ_{j≤i} φ(k_j)

Two ways to compute the same numbers:
    parallel (training): A = tril(φ(Q)·φ(K)ᵀ), O = A·V / A·1 — one matmul, O(T²·d) like softmax
        attention but without a softmax;
    recurrent (decoding): carry (S, z), a state of H·(d·d_v + d) numbers per sequence whatever
        T is, and spend O(d·d_v) per token — an RNN.
A KV cache is therefore replaced by the fixed-size state (S, z).
"""

from __future__ import annotations

from dataclasses import dataclass

from tinytensor.ops import clamp, exp, relu, stack, tril
from tinytensor.tensor import Tensor

from ..linear import Linear
from ..module import Module
from .state import set_variant_state, variant_state


def elu_feature_map(x):
    """φ(x) = elu(x) + 1 = x + 1 for x > 0, exp(x) for x ≤ 0: positive, so that the
    normalizer Σ φ(q)·φ(k) never vanishes. (Written as relu(x) + exp(min(x, 0)), which has the
    same values and gradient.)"""
    return relu(x) + exp(clamp(x, max=0.0))


def causal_linear_attention(phi_q, phi_k, v, state=None):
    """The parallel form over a chunk of T steps, continuing from `state` = (S, z) or None.

    Args:
        phi_q, phi_k: (B, H, T, d) positive features; v: (B, H, T, dv).
        state: (S (B, H, d, dv), z (B, H, d)) of the steps before this chunk.
    Returns:
        (out (B, H, T, dv), new state (S, z) including this chunk).
    """
    scores = tril(phi_q @ phi_k.transpose(-1, -2))  # (B, H, T, T): causal, no softmax
    numerator = scores @ v  # (B, H, T, dv)
    denominator = scores.sum(dim=-1)  # (B, H, T)
    s_new = phi_k.transpose(-1, -2) @ v  # (B, H, d, dv)
    z_new = phi_k.sum(dim=-2)  # (B, H, d)
    if state is not None:
        s_old, z_old = state
        numerator = numerator + phi_q @ s_old
        denominator = denominator + (phi_q @ z_old.unsqueeze(-1)).squeeze(-1)
        s_new, z_new = s_new + s_old, z_new + z_old
    # NOTE: no epsilon: φ > 0, so the denominator is a sum of positive terms (the diagonal
    # term φ(q_i)·φ(k_i) at least), exactly as the recurrent form's.
    return numerator / denominator.unsqueeze(-1), (s_new, z_new)


def recurrent_linear_attention(phi_q, phi_k, v, state=None):
    """The recurrent form, one step at a time: S += φ(k_t) v_tᵀ, z += φ(k_t),
    o_t = φ(q_t)ᵀ S / φ(q_t)ᵀ z. Same arguments and result as `causal_linear_attention`."""
    b, h, t, d = phi_q.shape
    if state is None:
        from tinytensor.creation import zeros

        s = zeros(b, h, d, v.shape[-1], dtype=v.dtype, device=v.device)
        z = zeros(b, h, d, dtype=v.dtype, device=v.device)
    else:
        s, z = state
    outs = []
    for i in range(t):
        q_i, k_i, v_i = phi_q[:, :, i], phi_k[:, :, i], v[:, :, i]  # (B, H, d), (B, H, dv)
        s = s + k_i.unsqueeze(-1) * v_i.unsqueeze(-2)  # (B, H, d, dv): outer product
        z = z + k_i
        num = (q_i.unsqueeze(-2) @ s).squeeze(-2)  # (B, H, dv)
        den = (q_i * z).sum(dim=-1, keepdim=True)  # (B, H, 1)
        outs.append(num / den)
    return stack(outs, dim=2), (s, z)  # (B, H, T, dv)


@dataclass
class LinearAttentionState:
    """The recurrent state that replaces a KV cache: S (B, H, d, dv) and z (B, H, d)."""

    s: Tensor
    z: Tensor

    def arrays(self):
        return (self.s, self.z)


class LinearAttention(Module):
    """Causal multi-head linear attention with φ = elu + 1 and a constant-size decoding state.

    Args:
        d_model, n_heads, d_head, bias: as `Attention` (parameters q_proj, k_proj,
            v_proj, out_proj).
        recurrent: compute with the step-by-step form (slow in Python; the reference for the
            parallel form, which is the default).

    forward(x, *, attn_mask=None, key_mask=None, attn_bias=None, is_causal=True, cache=None)
        key_mask (B, T_total) zeroes φ(k) (and v) of padding keys; is_causal=False attends to
        every key (O = φ(Q)·(φ(K)ᵀV) / φ(Q)·Σφ(K)); a cache carries the state (S, z).
        attn_mask and attn_bias have no meaning without a score matrix and are refused.

    Example:
        >>> la = LinearAttention(32, n_heads=4)
        >>> la(tt.randn(2, 5, 32)).shape
        (2, 5, 32)
    """

    def __init__(
        self, d_model, n_heads, d_head=None, bias=True, recurrent=False, device=None, dtype=None
    ):
        super().__init__()
        d_head = d_model // n_heads if d_head is None else d_head
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_head
        self.recurrent = bool(recurrent)
        f = dict(device=device, dtype=dtype)
        self.q_proj = Linear(d_model, n_heads * d_head, bias=bias, **f)
        self.k_proj = Linear(d_model, n_heads * d_head, bias=bias, **f)
        self.v_proj = Linear(d_model, n_heads * d_head, bias=bias, **f)
        self.out_proj = Linear(n_heads * d_head, d_model, bias=bias, **f)

    def _heads(self, x):
        b, t, _ = x.shape
        return x.reshape(b, t, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, T, hs)

    def forward(
        self, x, *, attn_mask=None, key_mask=None, attn_bias=None, is_causal=True, cache=None
    ):
        if not isinstance(x, Tensor) or x.ndim != 3 or x.shape[-1] != self.d_model:
            got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"LinearAttention: x must be (B, T, {self.d_model}), got {got}")
        if attn_mask is not None or attn_bias is not None:
            raise ValueError(
                "LinearAttention: attn_mask/attn_bias act on a score matrix, which linear "
                "attention never forms; use key_mask for padding"
            )
        b, t, _ = x.shape
        phi_q = elu_feature_map(self._heads(self.q_proj(x)))  # (B, H, T, hs)
        phi_k = elu_feature_map(self._heads(self.k_proj(x)))
        v = self._heads(self.v_proj(x))
        if key_mask is not None:
            if key_mask.ndim != 2 or key_mask.shape[0] != b or key_mask.shape[1] < t:
                raise ValueError(
                    f"LinearAttention: key_mask must be (B={b}, T_total ≥ {t}), got "
                    f"{tuple(key_mask.shape)}"
                )
            keep = key_mask[:, -t:].reshape(b, 1, t, 1).to(x.dtype)  # padding adds nothing
            phi_k, v = phi_k * keep, v * keep
        if not is_causal:
            if cache is not None:
                raise ValueError("LinearAttention: a cache needs causal attention")
            kv = phi_k.transpose(-1, -2) @ v  # (B, H, hs, hs)
            den = phi_q @ phi_k.sum(dim=-2).unsqueeze(-1)  # (B, H, T, 1)
            out = (phi_q @ kv) / den
        else:
            prior = variant_state(cache, self) if cache is not None else None
            state = None if prior is None else (prior.s, prior.z)
            form = recurrent_linear_attention if self.recurrent else causal_linear_attention
            out, (s, z) = form(phi_q, phi_k, v, state)
            if cache is not None:
                set_variant_state(cache, self, LinearAttentionState(s, z), t)
        out = out.transpose(1, 2).reshape(b, t, self.n_heads * self.d_head)  # (B, T, H·hs)
        return self.out_proj(out)

    def state_numbers(self, batch) -> int:
        """Numbers in the decoding state: B·H·(d·d_v + d), independent of T."""
        return batch * self.n_heads * (self.d_head * self.d_head + self.d_head)

    def extra_repr(self):
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_head={self.d_head}"
