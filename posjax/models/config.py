"""The model configuration: one frozen dataclass, validated once."""
from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp

from posjax.config_types import check_field_types

#: ``chunked_lm_loss=None`` selects the chunked loss from this vocabulary size on.
CHUNKED_LM_LOSS_MIN_VOCAB = 8192
ACTIVATIONS = ("gelu", "relu", "silu", "gelu_exact")


def _freeze(value: Any) -> Any:
    """A hashable stand-in for an option value (lists/arrays become tuples)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _freeze(value.tolist())
    return value


def _immutable(value: Any) -> Any:
    """Arrays and lists become (nested) tuples, dicts become :class:`PEOptions`."""
    if isinstance(value, dict):
        return PEOptions(value)
    if isinstance(value, (list, tuple)):
        return tuple(_immutable(v) for v in value)
    if hasattr(value, "tolist") and getattr(value, "ndim", 0) > 0:
        return _immutable(value.tolist())
    return value


class PEOptions(dict):
    """Read-only, hashable dict of PE options (so configs and model graphs can be cache keys).

    Array and list values are stored as nested tuples, so equality and hashing are well defined.
    """

    def __init__(self, *args, **kwargs):
        super().__init__({k: _immutable(v) for k, v in dict(*args, **kwargs).items()})

    def __hash__(self):
        return hash(_freeze(dict(self)))

    def _readonly(self, *args, **kwargs):
        raise TypeError("pe_options is read-only; use config.replace(pe_options={...})")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _readonly


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """Configuration of :class:`posjax.models.Transformer`.

    Attributes:
      vocab_size: number of token ids (ignored when ``input_dim`` is set).
      num_layers, d_model, num_heads, d_ff: the usual sizes (d_model divisible by num_heads).
      max_len: longest sequence (table size of absolute PEs).
      pe: a name from ``posjax.encodings.names()``.
      pe_options: options of that PE (see its options dataclass).
      causal: decoder (True) or bidirectional encoder (False).
      pre_norm: pre-LN blocks with a final LayerNorm (True) or post-LN blocks (False).
      dropout: residual/FFN dropout; ``attention_dropout`` (None: same) on attention weights.
      dtype: computation dtype ("float32" or "bfloat16"); parameters stay float32.
      lm_head_dtype: dtype of :class:`LanguageModel`'s output projection: "compute" (the
        ``dtype`` above; the ``[B, T, V]`` logits are then cast to float32 for the loss, the
        usual mixed-precision recipe) or "float32" (hidden states and the vocabulary product in
        float32: the GEMM then runs at TF32 or full-float32 rate on a GPU, about 20% of a
        bf16 BERT-base training step on an H200). Classifier heads always run in float32.
      activation: MLP nonlinearity; ``mlp_trailing_activation`` adds one after the output
        projection (the companion code of the learned-PE initialisation study, arXiv 2406.08272).
      pe_every_layer: add an embed PE at the input of every block instead of once; each block
        gets its own copy of the PE unless ``share_pe_across_layers`` (the learned-PE initialisation study, arXiv 2406.08272).
      embed_init_std: std of the token embedding init (0.02 BERT; 1.0 PyTorch default).
      input_dim: if set, inputs are float features ``[B, T, input_dim]`` embedded by a Linear
        layer instead of token ids.
      attention_impl: ``None``/"xla" (softmax attention in XLA, float32 logits) or "cudnn"
        (``jax.nn.dot_product_attention``'s fused kernel, falling back to XLA where it cannot run).
      kv_source: "residual" (standard) or "embeddings" (K and V from the layer-0 input in every
        layer: a quirk of arXiv 2505.13027's code).
      chunked_lm_loss: how :meth:`LanguageModel.loss` computes the vocabulary projection and
        cross-entropy: True uses :func:`posjax.training.chunked_cross_entropy` (token chunks,
        recomputed in the backward pass; the ``[tokens, V]`` float32 logits never exist), False
        the dense logits; None (default) chooses chunked when ``vocab_size >= 8192``
        (:data:`CHUNKED_LM_LOSS_MIN_VOCAB`).
      norm_eps: epsilon of every LayerNorm (BERT checkpoints: 1e-12; RoBERTa: 1e-5).
      type_vocab_size: > 0 adds a token-type (segment) embedding table added to the token
        embeddings (BERT, arXiv 1810.04805 Sec. 3); type 0 unless ``token_type_ids`` are given.
      embed_norm: a LayerNorm on the summed input embeddings (token + type + additive PE), before
        the first block (BERT/RoBERTa).
      layer_types: a per-layer attention schedule (None: every layer "full"): a pattern of
        "full", "sliding" and "chunked" repeated (and cut) to ``num_layers``, or one entry per
        layer (``posjax.models.schedules``; presets in ``schedules.PRESETS``).
      layer_pe: a PE per layer kind, ``{kind: name}`` or ``{kind: {"pe": name, "options":
        {...}}}`` (e.g. RoPE base 1e4 on "sliding", 1e6 on "full", or "none"); kinds left out
        use ``pe``/``pe_options``. Its PEs act on attention only (rotate, bias, logits hooks).
      sliding_window: keys a "sliding" layer sees: ``q - window < k <= q`` (causal) or
        ``|q - k| <= window // 2`` (bidirectional, ModernBERT).
      attention_chunk_size: "chunked" layers attend within chunks of this many positions.
      attention_temperature: Llama 4's query temperature ``{"floor_scale": 8192, "attn_scale":
        0.1, "layer_kinds": (...)}``: queries at position p scaled by
        ``log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1`` on the layers of
        ``layer_kinds`` (default: the layers whose PE is "none").
      ("gelu_exact" is the erf form of GELU used by BERT checkpoints; "gelu" is the tanh form.)
    """

    vocab_size: int = 128
    num_layers: int = 2
    d_model: int = 64
    num_heads: int = 4
    d_ff: int = 128
    max_len: int = 128
    pe: str = "sinusoidal"
    pe_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    causal: bool = False
    pre_norm: bool = True
    dropout: float = 0.0
    attention_dropout: float | None = None
    dtype: str = "float32"
    lm_head_dtype: str = "compute"
    activation: str = "gelu"
    mlp_trailing_activation: bool = False
    pe_every_layer: bool = False
    share_pe_across_layers: bool = False
    embed_init_std: float = 0.02
    input_dim: int | None = None
    attention_impl: str | None = None
    kv_source: str = "residual"
    chunked_lm_loss: bool | None = None
    norm_eps: float = 1e-6
    type_vocab_size: int = 0
    embed_norm: bool = False
    layer_types: tuple[str, ...] | None = None
    layer_pe: dict[str, Any] | None = None
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    attention_temperature: dict[str, Any] | None = None

    def __post_init__(self):
        check_field_types(self, "TransformerConfig.")
        for name in ("num_layers", "d_model", "num_heads", "d_ff", "max_len"):
            if getattr(self, name) <= 0:
                raise ValueError(f"TransformerConfig.{name} must be positive, got {getattr(self, name)}")
        if self.input_dim is None and self.vocab_size <= 0:
            raise ValueError(f"TransformerConfig.vocab_size must be positive, got {self.vocab_size}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}")
        for name in ("dropout", "attention_dropout"):
            v = getattr(self, name)
            if v is not None and not 0.0 <= v < 1.0:
                raise ValueError(f"TransformerConfig.{name} must be in [0, 1), got {v}")
        if self.dtype not in ("float32", "bfloat16", "float16", "float64"):
            raise ValueError(f"unsupported dtype {self.dtype!r}")
        if self.chunked_lm_loss not in (None, True, False):
            raise ValueError(f"chunked_lm_loss must be None, True or False, got "
                             f"{self.chunked_lm_loss!r}")
        if self.lm_head_dtype not in ("compute", "float32"):
            raise ValueError(f"lm_head_dtype must be 'compute' or 'float32', "
                             f"got {self.lm_head_dtype!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if self.attention_impl not in (None, "xla", "cudnn"):
            raise ValueError(f"attention_impl must be None, 'xla' or 'cudnn', got {self.attention_impl!r}")
        if self.kv_source not in ("residual", "embeddings"):
            raise ValueError(f"kv_source must be 'residual' or 'embeddings', got {self.kv_source!r}")
        if not self.norm_eps > 0:
            raise ValueError(f"TransformerConfig.norm_eps must be > 0, got {self.norm_eps}")
        if self.type_vocab_size < 0:
            raise ValueError(f"TransformerConfig.type_vocab_size must be >= 0, "
                             f"got {self.type_vocab_size}")
        object.__setattr__(self, "pe_options", PEOptions(self.pe_options))
        self._check_pe()
        self._check_schedule()

    def _check_schedule(self) -> None:
        """Validate and freeze the per-layer schedule fields (all None: a single-PE model)."""
        from posjax.models.schedules import HF_LAYER_KINDS, LAYER_KINDS, expand_layer_types

        if self.layer_types is not None:
            kinds = tuple(HF_LAYER_KINDS.get(k, k) for k in self.layer_types)
            bad = [k for k in kinds if k not in LAYER_KINDS]
            if bad:
                raise ValueError(f"TransformerConfig.layer_types: unknown kind {bad[0]!r}; "
                                 f"kinds: {', '.join(LAYER_KINDS)}")
            try:
                expand_layer_types(kinds, self.num_layers)
            except ValueError as e:
                raise ValueError(f"TransformerConfig.layer_types: {e}") from None
            object.__setattr__(self, "layer_types", kinds)
        used = set(self.kinds)
        for name, kind in (("sliding_window", "sliding"), ("attention_chunk_size", "chunked")):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"TransformerConfig.{name} must be >= 1, got {value}")
            if kind in used and value is None:
                raise ValueError(f"TransformerConfig.layer_types has {kind!r} layers but "
                                 f"{name} is not set")
        if self.layer_pe is not None:
            specs = {}
            for kind, spec in dict(self.layer_pe).items():
                if kind not in LAYER_KINDS:
                    raise ValueError(f"TransformerConfig.layer_pe: unknown layer kind {kind!r}; "
                                     f"kinds: {', '.join(LAYER_KINDS)}")
                if isinstance(spec, str):
                    spec = {"pe": spec, "options": {}}
                if not isinstance(spec, dict) or set(spec) - {"pe", "options"} or "pe" not in spec:
                    raise ValueError(f"TransformerConfig.layer_pe[{kind!r}] must be a PE name or "
                                     f"{{'pe': name, 'options': {{...}}}}, got {spec!r}")
                specs[kind] = PEOptions(pe=spec["pe"], options=PEOptions(spec.get("options") or {}))
            object.__setattr__(self, "layer_pe", PEOptions(specs))
            from posjax.encodings.registry import info
            for kind in sorted(used):
                name, options = self.layer_pe_spec(kind)
                self._check_pe(name, options, where=f"layer_pe[{kind!r}]")
                hooks = info(name).hooks - {"rotate", "bias", "logits"}
                if hooks:
                    raise ValueError(f"TransformerConfig.layer_pe[{kind!r}]: PE {name!r} has the "
                                     f"{'/'.join(sorted(hooks))} hook; a per-layer PE may act "
                                     f"on attention only (rotate, bias, logits)")
        if self.attention_temperature is not None:
            temp = dict(self.attention_temperature)
            unknown = set(temp) - {"floor_scale", "attn_scale", "layer_kinds"}
            if unknown:
                raise ValueError(f"TransformerConfig.attention_temperature: unknown keys "
                                 f"{sorted(unknown)} (floor_scale, attn_scale, layer_kinds)")
            floor = temp.setdefault("floor_scale", 8192.0)
            temp.setdefault("attn_scale", 0.1)
            if not float(floor) > 0:
                raise ValueError(f"attention_temperature floor_scale must be > 0, got {floor}")
            kinds = tuple(temp.get("layer_kinds") or ())
            for k in kinds:
                if k not in LAYER_KINDS:
                    raise ValueError(f"attention_temperature layer_kinds: unknown kind {k!r}")
            temp["layer_kinds"] = kinds
            object.__setattr__(self, "attention_temperature", PEOptions(temp))

    @property
    def kinds(self) -> tuple[str, ...]:
        """The attention kind of every layer ("full" / "sliding" / "chunked")."""
        from posjax.models.schedules import expand_layer_types

        if self.layer_types is None:
            return ("full",) * self.num_layers
        return expand_layer_types(tuple(self.layer_types), self.num_layers)

    def layer_pe_spec(self, kind: str) -> tuple[str, dict[str, Any]]:
        """The PE (name, options) of the layers of ``kind``."""
        spec = (self.layer_pe or {}).get(kind)
        if spec is None:
            return self.pe, dict(self.pe_options)
        return spec["pe"], dict(spec["options"])

    def temperature_layers(self) -> tuple[bool, ...]:
        """Per layer: whether the attention temperature scales its queries."""
        if self.attention_temperature is None:
            return (False,) * self.num_layers
        kinds = self.attention_temperature["layer_kinds"]
        if kinds:
            return tuple(k in kinds for k in self.kinds)
        return tuple(self.layer_pe_spec(k)[0] == "none" for k in self.kinds)

    def _check_pe(self, pe: str | None = None, options: dict | None = None, *,
                  where: str = "pe") -> None:
        """Unknown PE names and bad PE options fail here, not when the model is built."""
        from posjax.encodings.base import PEContext
        from posjax.encodings.registry import build_options, info

        pe = self.pe if pe is None else pe
        options = dict(self.pe_options) if options is None else options
        opt_where = "pe_options" if where == "pe" else where
        try:
            info(pe)
        except ValueError as e:
            raise ValueError(f"TransformerConfig.{where}: {e}") from None
        try:
            build_options(pe, options, PEContext(
                d_model=self.d_model, num_heads=self.num_heads, head_dim=self.head_dim,
                max_len=self.max_len, num_layers=self.num_layers, causal=self.causal))
        except ValueError as e:
            raise ValueError(f"TransformerConfig.{opt_where}: {e}") from None

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    @property
    def jnp_dtype(self):
        return jnp.dtype(self.dtype)

    @property
    def attn_dropout(self) -> float:
        return self.dropout if self.attention_dropout is None else self.attention_dropout

    def replace(self, **changes: Any) -> "TransformerConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
