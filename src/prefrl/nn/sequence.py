"""Reward networks over whole segments: an LSTM (NMR) and the Preference Transformer.

Inputs are (batch, T, dim) observations and actions, (batch, T) timesteps (1..T within the
segment; 0 at padding) and a (batch, T) mask (1 = a real step). Both return per-step rewards
r̂ (batch, T); the transformer also returns the preference-attention output z (batch, T) and
its attention weights.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from prefrl.nn.mlp import MLP


class MarkovReward(nn.Module):
    """MR: an MLP r̂(s_t, a_t) applied to every step on its own."""

    hidden_dims: tuple[int, ...] = (256, 256)

    @nn.compact
    def __call__(self, obs, action, timestep, mask, train: bool = False):
        del timestep, mask, train
        x = jnp.concatenate([obs, action], -1)
        return nn.Dense(1)(MLP(self.hidden_dims)(x))[..., 0]


class LSTMReward(nn.Module):
    """NMR (Kim et al. 2023's baseline): a step embedding, an LSTM over the segment, a linear
    head per step. Padded steps hold the LSTM at its initial state, so a window padded in front
    gives the same rewards as the unpadded steps alone."""

    embed_dim: int = 256
    hidden_dim: int = 256

    @nn.compact
    def __call__(self, obs, action, timestep, mask, train: bool = False):
        del timestep, train
        x = nn.relu(nn.Dense(self.embed_dim)(jnp.concatenate([obs, action], -1)))
        cell = nn.OptimizedLSTMCell(self.hidden_dim)
        carry0 = cell.initialize_carry(jax.random.key(0), x[:, 0].shape)

        def step(cell, carry, inputs):
            xt, mt = inputs
            new_carry, h = cell(carry, xt)
            keep = mt[:, None] > 0
            carry = jax.tree.map(lambda n, c0: jnp.where(keep, n, c0), new_carry, carry0)
            return carry, h * keep

        scan = nn.scan(
            step, variable_broadcast="params", split_rngs={"params": False}, in_axes=1, out_axes=1
        )
        _, h = scan(cell, carry0, (x, mask))
        return nn.Dense(1)(h)[..., 0]


class _CausalBlock(nn.Module):
    """A GPT-2 block: pre-LayerNorm causal self-attention and MLP, each with a residual.
    With `last_only`, only the last token's output is computed (it attends to every token)."""

    width: int
    heads: int
    dropout: float

    @nn.compact
    def __call__(self, x, token_mask, train: bool, last_only: bool = False):
        t = x.shape[1]
        h_in = nn.LayerNorm()(x)
        attention = nn.MultiHeadDotProductAttention(
            num_heads=self.heads, dropout_rate=self.dropout, deterministic=not train
        )
        if last_only:
            allowed = token_mask[:, None, None, :] > 0
            h = attention(h_in[:, -1:], h_in, mask=allowed)
            x = x[:, -1:]
        else:
            causal = jnp.tril(jnp.ones((t, t), bool))
            allowed = causal[None, None] & (token_mask[:, None, None, :] > 0)
            h = attention(h_in, mask=allowed)
        x = x + nn.Dropout(self.dropout)(h, deterministic=not train)
        h = nn.Dense(4 * self.width)(nn.LayerNorm()(x))
        h = nn.Dense(self.width)(nn.gelu(h))
        return x + nn.Dropout(self.dropout)(h, deterministic=not train)


class PreferenceTransformer(nn.Module):
    """Kim et al. (2023): embeddings of state and action plus a learned timestep embedding,
    tokens interleaved (a_1, s_1, a_2, s_2, ...), causal transformer blocks; from each state
    token's output, a linear map gives a query, a key and a reward r̂_t; one bidirectional
    attention head mixes them, z_i = Σ_j softmax_j(q_i · k_j) r̂_j. A segment's score is the
    mean of z over its steps (the preference attention layer is always on)."""

    embed_dim: int = 256
    layers: int = 1
    heads: int = 4
    dropout: float = 0.1
    max_timestep: int = 1000

    @nn.compact
    def __call__(self, obs, action, timestep, mask, train: bool = False, last_only: bool = False):
        """(r̂, z, attention weights), each per step; with `last_only`, r̂ of the last step only
        (b,), computing the last layer for that token alone (relabelling needs no more)."""
        b, t, _ = obs.shape
        time_emb = nn.Embed(self.max_timestep + 1, self.embed_dim)(timestep)
        s = nn.Dense(self.embed_dim)(obs) + time_emb
        a = nn.Dense(self.embed_dim)(action) + time_emb
        tokens = jnp.stack([a, s], axis=2).reshape(b, 2 * t, self.embed_dim)
        token_mask = jnp.repeat(mask, 2, axis=1)
        x = nn.Dropout(self.dropout)(nn.LayerNorm()(tokens), deterministic=not train)
        for i in range(self.layers):
            last = last_only and i == self.layers - 1
            x = _CausalBlock(self.embed_dim, self.heads, self.dropout)(x, token_mask, train, last)
        x = nn.LayerNorm()(x)
        head = nn.Dense(2 * self.embed_dim + 1)
        if last_only:
            return head(x[:, -1])[..., -1]  # the last token is the last step's state
        state_out = x.reshape(b, t, 2, self.embed_dim)[:, :, 1]
        qkr = head(state_out)
        q, k = qkr[..., : self.embed_dim], qkr[..., self.embed_dim : 2 * self.embed_dim]
        r = qkr[..., -1]
        logits = jnp.einsum("btd,bsd->bts", q, k) / jnp.sqrt(self.embed_dim).astype(q.dtype)
        logits = jnp.where(mask[:, None, :] > 0, logits, -1e9)
        weights = jax.nn.softmax(logits, axis=-1)
        z = jnp.einsum("bts,bs->bt", weights, r)
        return r, z, weights
