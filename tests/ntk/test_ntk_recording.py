"""The recording proxy reports exactly the neural-tangents functions that were called."""
import jax.numpy as jnp

from ntk.recording import cached_with_calls, neural_tangents, recording


def test_records_called_functions_and_their_returned_functions():
    nt = neural_tangents()
    with recording() as outer:
        _, _, kernel_fn = nt.stax.serial(nt.stax.Dense(1), nt.stax.Relu())
        with recording() as inner:
            kernel_fn(jnp.ones((2, 3)), None, "nngp")
    assert inner == {"stax.serial.kernel_fn"}
    assert outer == {"stax.serial", "stax.Dense", "stax.Relu", "stax.serial.kernel_fn"}
    with recording() as none:
        nt.stax.serial                                  # attribute access is not a call
        kernel_fn(jnp.ones((2, 3)), None, "nngp")
    assert none == {"stax.serial.kernel_fn"}


def test_factory_results_and_enums():
    nt = neural_tangents()
    impl = nt.NtkImplementation.JACOBIAN_CONTRACTION       # enums pass through untouched
    f = lambda p, x: x * p                                 # noqa: E731
    with recording() as calls:
        fn = nt.empirical_ntk_fn(f, implementation=impl)
    assert calls == {"empirical_ntk_fn"}
    with recording() as calls:
        fn(jnp.ones((2, 1)), None, jnp.ones(()))
    assert calls == {"empirical_ntk_fn.fn"}


def test_cached_computations_replay_their_calls():
    count = []

    @cached_with_calls()
    def compute(n):
        count.append(n)
        neural_tangents().stax.serial(neural_tangents().stax.Identity())
        return n * 2

    with recording() as first:
        assert compute(3) == 6
    with recording() as second:
        assert compute(3) == 6
    assert count == [3]                                    # computed once
    assert first == second == {"stax.serial", "stax.Identity"}
