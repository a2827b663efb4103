"""A `dot_general` for Dense layers with few outputs (an actor's heads), whose kernel gradient
XLA:CPU computes several times faster.

Autodiff writes a layer's kernel gradient as x^T @ g, an (in, out) product that contracts the
batch axis of both operands. With a narrow output (out = 6 for HalfCheetah's actions) XLA:CPU
runs that as a slow library call: about 50 µs for a 256x256 by 256x6 product on the project's
CPU, where the same FLOPs as g^T @ x, an (out, in) product, take about 12 µs
(benchmarks/kernel_grad_forms.py at 3d73e48). This VJP computes the gradient in that wide form and
transposes the small result, whenever the layer has fewer outputs than inputs (otherwise the two
forms cost the same, or the wide one loses). The optimisation barrier keeps XLA from folding the
transpose back into the product. The values are the same up to float rounding (bit for bit on
an AVX-512 CPU; on an AVX2 one they differ in the last bits, about 1e-6), and the parameters
are those of a plain `nn.Dense`, so checkpoints do not change. Like any `jax.custom_vjp`, it
supports reverse-mode differentiation only (no `jax.jvp` through it).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


@jax.custom_vjp
def _matmul(x: jax.Array, kernel: jax.Array) -> jax.Array:
    return jnp.matmul(x, kernel)


def _matmul_fwd(x, kernel):
    return jnp.matmul(x, kernel), (x, kernel)


def _matmul_bwd(residuals, g):
    x, kernel = residuals
    grad_x = jnp.matmul(g, kernel.T)
    x2, g2 = x.reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1])
    if kernel.shape[1] >= kernel.shape[0]:  # not narrow: autodiff's own form is as fast
        return grad_x, jnp.matmul(x2.T, g2)
    grad_kernel_t = lax.optimization_barrier(jnp.matmul(g2.T, x2))  # (out, in)
    return grad_x, grad_kernel_t.T


_matmul.defvjp(_matmul_fwd, _matmul_bwd)


def narrow_dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """Drop-in `dot_general` for `nn.Dense(..., dot_general=narrow_dot_general)`."""
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    dense = (
        tuple(lhs_contract) == (lhs.ndim - 1,)
        and tuple(rhs_contract) == (0,)
        and rhs.ndim == 2
        and not lhs_batch
        and not rhs_batch
    )
    if not dense or precision is not None or preferred_element_type is not None:
        raise ValueError(
            f"narrow_dot_general handles a Dense layer's x @ kernel only, got dimension numbers "
            f"{dimension_numbers}, kernel rank {rhs.ndim}, precision={precision!r}, "
            f"preferred_element_type={preferred_element_type!r}"
        )
    return _matmul(lhs, rhs)
