import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from prefrl.nn.dense import narrow_dot_general


@pytest.mark.parametrize(
    "x_shape, features",
    [((32, 64), 6), ((4, 8, 64), 3), ((32, 5), 16), ((32, 16), 16)],  # narrow, (B, T, in), wide
)
def test_narrow_dense_matches_plain_dense(x_shape, features):
    """The same values computed another way: equal up to float rounding, which differs with the
    CPU's vector width (AVX2 against AVX-512), so compared with a tolerance."""
    x = jax.random.normal(jax.random.PRNGKey(0), x_shape)
    plain = nn.Dense(features)
    narrow = nn.Dense(features, dot_general=narrow_dot_general)
    params = plain.init(jax.random.PRNGKey(1), x)
    assert jax.tree.structure(params) == jax.tree.structure(narrow.init(jax.random.PRNGKey(1), x))

    def loss(module):
        return lambda p, x: jnp.sum(jnp.sin(module.apply(p, x)))

    ref = jax.jit(jax.grad(loss(plain), argnums=(0, 1)))(params, x)
    got = jax.jit(jax.grad(loss(narrow), argnums=(0, 1)))(params, x)
    for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(got)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        plain.apply(params, x), narrow.apply(params, x), rtol=1e-5, atol=1e-6
    )


def test_narrow_dot_general_refuses_what_is_not_a_dense_layer():
    x, w = jnp.ones((4, 3)), jnp.ones((3, 2))
    with pytest.raises(ValueError, match="x @ kernel only"):
        narrow_dot_general(x, w, (((0,), (0,)), ((), ())))
    with pytest.raises(ValueError, match="precision"):
        narrow_dot_general(x, w, (((1,), (0,)), ((), ())), precision=jax.lax.Precision.HIGHEST)
