"""GPT-2's published weights, and our own models, in the Hugging Face Hub's layout.

A model on the Hub is a folder with two files: ``config.json`` (the sizes) and
``model.safetensors`` (the tensors by name). ``from_pretrained`` reads such a folder from the
Hub (``hf_hub_download``, cached under ``HF_HOME``) or from disk, maps GPT-2's parameter
names and Conv1D layouts onto our ``GPT`` with ``generation.load_gpt2_state_dict`` and
returns the model in eval mode::

    from gpt import hub
    model = hub.from_pretrained("gpt2")              # openai-community/gpt2, 124M parameters
    model = hub.from_pretrained("gpt2-xl")           # 1.5B
    model = hub.from_pretrained("path/to/folder")    # config.json + model.safetensors
    hub.save_pretrained(model, "my-gpt")             # the same layout, written atomically
    hub.push_to_hub(model, "me/my-gpt")              # then from_pretrained("me/my-gpt")

``save_pretrained`` writes exactly what ``transformers``' ``GPT2LMHeadModel.save_pretrained``
writes (GPT-2's names, Conv1D weights as [in, out], the tied output layer left out because
safetensors refuses two names for one tensor), so a course model also loads in
``transformers`` and in every tool that reads GPT-2.

Offline, or when the Hub is unreachable, loading raises ``HubError`` with one line that says
so and how to point at a local copy: a path, or the ``GPT2_WEIGHTS_DIR`` environment variable
(a folder with one subfolder per model: ``gpt2/``, ``gpt2-medium/``, ...).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes

from core.atomic import atomic_write

from .lessons import Lessons, load
from .model import GPT, GPTConfig

GPT2_NAMES = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")
HUB_OWNER = "openai-community"  # where OpenAI's GPT-2 checkpoints live on the Hub
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
LOCAL_ENV = "GPT2_WEIGHTS_DIR"  # a folder holding gpt2/, gpt2-medium/, ... (each a Hub folder)
LAYER_NORM_EPS = 1e-5  # nn.LayerNorm's default, and GPT-2's


class HubError(RuntimeError):
    """A model that cannot be loaded or saved; the message is one line that says what to do."""


def repo_id(name: str) -> str:
    """The Hub repository of a model name: ``gpt2`` -> ``openai-community/gpt2``."""
    return f"{HUB_OWNER}/{name}" if name in GPT2_NAMES else name


# ------------------------------------------------------------------------------- config.json


def config_from_hub(hf_config: dict, dropout: float = 0.0) -> GPTConfig:
    """Our ``GPTConfig`` from a GPT-2 ``config.json`` (``n_layer``, ``n_head``, ``n_embd``,
    ``n_positions``, ``vocab_size``); ``HubError`` for a model our GPT cannot hold."""
    try:
        sizes = {key: int(hf_config[key]) for key in ("n_layer", "n_head", "n_embd", "vocab_size")}
        block_size = int(hf_config["n_positions" if "n_positions" in hf_config else "n_ctx"])
    except (KeyError, TypeError, ValueError):
        raise HubError(
            "config.json lacks GPT-2's sizes (n_layer, n_head, n_embd, n_positions, vocab_size)"
        ) from None
    differences = {
        "model_type": (hf_config.get("model_type", "gpt2"), ("gpt2",)),
        "activation_function": (
            hf_config.get("activation_function", "gelu_new"),
            ("gelu_new", "gelu_pytorch_tanh"),  # both are GELU's tanh approximation
        ),
        "n_inner": (hf_config.get("n_inner"), (None, 4 * sizes["n_embd"])),
        "layer_norm_epsilon": (hf_config.get("layer_norm_epsilon", LAYER_NORM_EPS), (1e-5,)),
        "scale_attn_weights": (hf_config.get("scale_attn_weights", True), (True,)),
        "scale_attn_by_inverse_layer_idx": (
            hf_config.get("scale_attn_by_inverse_layer_idx", False),
            (False,),
        ),
    }
    unsupported = [f"{key}={got!r}" for key, (got, ok) in differences.items() if got not in ok]
    if unsupported:
        raise HubError(
            f"config.json describes a model our GPT cannot hold ({', '.join(unsupported)})"
        )
    try:
        return GPTConfig(
            block_size=block_size, dropout=dropout, bias=bool(hf_config.get("bias", True)), **sizes
        )
    except ValueError as error:
        raise HubError(f"config.json: {error}") from None


def config_to_hub(config: GPTConfig) -> dict:
    """A GPT-2 ``config.json`` for our config (what ``transformers`` reads, plus ``bias``)."""
    hf_config = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": config.vocab_size,
        "n_positions": config.block_size,
        "n_embd": config.n_embd,
        "n_layer": config.n_layer,
        "n_head": config.n_head,
        "n_inner": None,
        "activation_function": "gelu_new",
        "layer_norm_epsilon": LAYER_NORM_EPS,
        "resid_pdrop": config.dropout,
        "embd_pdrop": config.dropout,
        "attn_pdrop": config.dropout,
        "initializer_range": 0.02,
        "tie_word_embeddings": True,
        "bias": config.bias,
    }
    if config.vocab_size > 50256:  # GPT-2's <|endoftext|> exists in this vocabulary
        hf_config.update(bos_token_id=50256, eos_token_id=50256)
    return hf_config


# ---------------------------------------------------------------------------------- loading


def from_pretrained(
    name_or_path: str | os.PathLike[str] = "gpt2",
    *,
    dropout: float = 0.0,
    device: str | torch.device | None = None,
    revision: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    lessons: Lessons | str | None = None,
) -> GPT:
    """Our GPT with published or saved weights, in eval mode.

    Args:
        name_or_path: ``gpt2``, ``gpt2-medium``, ``gpt2-large`` or ``gpt2-xl`` (OpenAI's
            checkpoints, from ``openai-community/<name>``); another Hub repository
            (``owner/name``, e.g. one made by ``push_to_hub``); a local folder with
            ``config.json`` and ``model.safetensors``; or a ``.safetensors`` file with
            ``config.json`` beside it. With ``GPT2_WEIGHTS_DIR`` set, ``<that folder>/<name>``
            is used instead of the Hub when it exists.
        dropout: the dropout of the returned model (0 for inference; set it to fine-tune).
        device: where to put the model (default: the CPU).
        revision, cache_dir: passed to ``hf_hub_download``.
        lessons: whose ``load_gpt2_state_dict`` maps the weights and whose functions the
            model calls (``gpt.lessons``; default: the reference).

    Raises:
        HubError: one line: the Hub is unreachable (and how to use a local copy instead), the
            repository or file does not exist, or the files do not describe a GPT-2.
    """
    config_path, weights_path = locate(name_or_path, revision=revision, cache_dir=cache_dir)
    try:
        hf_config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise HubError(f"cannot read {config_path} ({_short(error)})") from None
    if not isinstance(hf_config, dict):
        raise HubError(f"{config_path} is not a model configuration")
    try:
        config = config_from_hub(hf_config, dropout=dropout)
    except HubError as error:
        raise HubError(f"{config_path}: {error}") from None
    try:
        tensors = load_file(str(weights_path))
    except (OSError, SafetensorError) as error:
        raise HubError(
            f"{weights_path} is not a readable safetensors file ({_short(error)})"
        ) from None
    lessons = load(lessons)
    state = lessons.generation.load_gpt2_state_dict(tensors)
    model = build(config, state, source=str(weights_path), lessons=lessons)
    return model.to(device) if device is not None else model


def build(
    config: GPTConfig,
    state: dict[str, torch.Tensor],
    source: str = "the weights",
    lessons: Lessons | str | None = None,
) -> GPT:
    """A GPT of ``config`` holding ``state`` (our names), the output layer tied to ``wte``.

    The model is created on the meta device and takes the tensors over (``assign=True``), so
    no random initialisation runs and no second copy of GPT-2-xl's 6 GB is made.
    """
    wte = state.get("transformer.wte.weight")
    head = state.get("lm_head.weight", wte)
    if wte is not None and head is not None and head is not wte and not torch.equal(head, wte):
        raise HubError(
            f"{source} has an output layer that differs from the token table; "
            "our GPT ties the two, as GPT-2 does"
        )
    state = {key: value for key, value in state.items() if key != "lm_head.weight"}
    with torch.device("meta"):
        model = GPT(config, lessons)
    try:
        missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    except RuntimeError as error:  # a shape that disagrees with config.json
        raise HubError(f"{source} does not match its config.json ({_short(error)})") from None
    missing = [key for key in missing if key != "lm_head.weight"]
    if missing or unexpected:
        detail = "; ".join(
            f"{label}: {', '.join(keys[:3])}{', ...' if len(keys) > 3 else ''}"
            for label, keys in (("missing", missing), ("unexpected", unexpected))
            if keys
        )
        raise HubError(f"{source} does not hold a GPT-2 of its config.json ({detail})")
    model.lm_head.weight = model.transformer.wte.weight  # tie again: one table, two uses
    return model.float().eval()


def locate(
    name_or_path: str | os.PathLike[str],
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> tuple[Path, Path]:
    """The (config.json, model.safetensors) paths of a model: local, or downloaded once."""
    text = os.fspath(name_or_path)
    path = Path(text).expanduser()
    if path.is_dir():
        return _folder(path)
    if path.is_file():
        config = path.parent / CONFIG_NAME
        if not config.is_file():
            raise HubError(f"{path} has no {CONFIG_NAME} beside it (GPT-2's sizes are read there)")
        return config, path
    if text.startswith((".", "/", "~")) or text.endswith((".safetensors", ".json")):
        raise HubError(f"no such file or folder: {text}")
    local = os.environ.get(LOCAL_ENV)
    if local and (Path(local) / text).is_dir():
        return _folder(Path(local) / text)
    if text not in GPT2_NAMES and text.count("/") != 1:
        raise HubError(
            f"unknown model {text!r}: use one of {', '.join(GPT2_NAMES)}, a Hub repository "
            "(owner/name) or a local folder with config.json and model.safetensors"
        )
    repo = repo_id(text)
    return (
        _download(text, repo, CONFIG_NAME, revision, cache_dir),
        _download(text, repo, WEIGHTS_NAME, revision, cache_dir),
    )


def _folder(path: Path) -> tuple[Path, Path]:
    config, weights = path / CONFIG_NAME, path / WEIGHTS_NAME
    for needed in (config, weights):
        if not needed.is_file():
            raise HubError(
                f"{path} has no {needed.name}; a model folder holds {CONFIG_NAME} and "
                f"{WEIGHTS_NAME} (as save_pretrained writes them)"
            )
    return config, weights


def _download(text: str, repo: str, filename: str, revision: str | None, cache_dir) -> Path:
    """One file of ``repo`` through ``hf_hub_download``; ``HubError`` in one line if it fails."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import (
        EntryNotFoundError,
        GatedRepoError,
        HFValidationError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        with _quiet_hub_logs():  # its retry warnings would bury the one line that matters
            return Path(hf_hub_download(repo, filename, revision=revision, cache_dir=cache_dir))
    except HFValidationError:
        raise HubError(f"{text!r} is not a Hub repository name (owner/name)") from None
    except GatedRepoError:
        raise HubError(f"{repo} is gated on the Hugging Face Hub; log in (hf auth login)") from None
    except RepositoryNotFoundError:
        raise HubError(
            f"no model {repo} on the Hugging Face Hub (or it is private: log in with hf auth login)"
            + _not_local(text)
        ) from None
    except RevisionNotFoundError:
        raise HubError(f"{repo} has no revision {revision!r} on the Hugging Face Hub") from None
    except EntryNotFoundError as error:
        if not _offline(error):
            raise HubError(
                f"{repo} has no {filename} on the Hugging Face Hub; this loader reads "
                f"{CONFIG_NAME} and {WEIGHTS_NAME}"
            ) from None
        raise HubError(_unreachable(text, repo, error)) from None
    except Exception as error:  # noqa: BLE001 - offline, DNS, proxy, HTTP 5xx, a broken download
        raise HubError(_unreachable(text, repo, error)) from None


@contextlib.contextmanager
def _quiet_hub_logs() -> Iterator[None]:
    """Silence huggingface_hub's warnings (download progress bars are not logs: they stay)."""
    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _offline(error: BaseException) -> bool:
    """Whether a 'file not found' error is really 'not in the cache, and no network'."""
    from huggingface_hub.utils import LocalEntryNotFoundError

    return isinstance(error, LocalEntryNotFoundError)


def _unreachable(text: str, repo: str, error: BaseException) -> str:
    from huggingface_hub import constants

    offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0") or getattr(
        constants, "HF_HUB_OFFLINE", False
    )
    why = "offline mode, HF_HUB_OFFLINE, is on" if offline else _short(_root(error))
    local = os.environ.get(LOCAL_ENV)
    env = (
        f"add {text}/ to {LOCAL_ENV}={local}"
        if local
        else f"set {LOCAL_ENV} to a folder holding {text}/"
    )
    return (
        f"cannot download {repo} from the Hugging Face Hub ({why}) and it is not in the local "
        f"cache{_not_local(text)}; use a local copy: pass the path of a folder with "
        f"{CONFIG_NAME} and {WEIGHTS_NAME}, or {env} (get one where there is network: "
        f"hf download {repo} {CONFIG_NAME} {WEIGHTS_NAME} --local-dir DIR)"
    )


def _not_local(text: str) -> str:
    return f" (and there is no local folder {text})" if "/" in text else ""


def _root(error: BaseException) -> BaseException:
    """The innermost cause: 'ConnectError: connection refused', not the wrapper's essay."""
    seen = set()
    inner = error.__cause__ or error.__context__
    while inner is not None and id(error) not in seen:
        seen.add(id(error))
        error = inner
        inner = error.__cause__ or error.__context__
    return error


def _short(error: BaseException, limit: int = 160) -> str:
    """``Type: first line of the message``, cut to ``limit`` characters."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0].strip()}" if lines else type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def available(name_or_path: str | os.PathLike[str] = "gpt2") -> bool:
    """Whether ``from_pretrained(name_or_path)`` can load without the network.

    True for an existing local folder or file, a ``GPT2_WEIGHTS_DIR`` copy, or a model whose
    two files are already in the Hub's local cache. Never downloads: pages and tests that
    need GPT-2's real weights ask this first and say plainly when they are absent.
    """
    text = os.fspath(name_or_path)
    if Path(text).expanduser().exists():
        return True
    local = os.environ.get(LOCAL_ENV)
    if local and (Path(local) / text).is_dir():
        return True
    if text not in GPT2_NAMES and text.count("/") != 1:
        return False
    from huggingface_hub import try_to_load_from_cache

    return all(
        isinstance(try_to_load_from_cache(repo_id(text), name), str)
        for name in (CONFIG_NAME, WEIGHTS_NAME)
    )


# ---------------------------------------------------------------------------------- saving


def hub_state_dict(model: GPT) -> dict[str, torch.Tensor]:
    """Our parameters under GPT-2's names and layouts (the inverse of load_gpt2_state_dict).

    The four Conv1D weights per block go back to [in, out]; ``lm_head.weight`` is left out
    when it is the token table (safetensors stores no tensor twice; loading ties it again).
    """
    model = getattr(model, "module", model)  # DistributedDataParallel wraps the model
    tied = model.lm_head.weight is model.transformer.wte.weight
    tensors = {}
    for key, value in model.state_dict().items():
        if key == "lm_head.weight" and tied:
            continue
        value = value.detach().cpu()
        if key.endswith(model.lessons.generation.CONV1D_WEIGHTS):
            value = value.t()
        tensors[key] = value.contiguous()
    return tensors


def save_pretrained(model: GPT, directory: str | os.PathLike[str]) -> Path:
    """Write ``config.json`` and ``model.safetensors`` into ``directory``, each atomically.

    The weights go first: a folder whose config.json is new always has matching weights.
    Returns the folder.
    """
    directory = Path(directory)
    core = getattr(model, "module", model)
    payload = safetensors_bytes(hub_state_dict(core), metadata={"format": "pt"})
    atomic_write(directory / WEIGHTS_NAME, lambda f: f.write(payload))
    config = json.dumps(config_to_hub(core.config), indent=2) + "\n"
    atomic_write(directory / CONFIG_NAME, lambda f: f.write(config.encode()))
    return directory


MODEL_CARD = """---
library_name: pytorch
tags: [gpt2, text-generation, build-a-gpt-from-the-ground-up]
---
# {repo}

A GPT-2-style model trained with the course "Build a GPT from the ground up". The folder is
in GPT-2's layout (config.json + model.safetensors): load it with
`gpt.hub.from_pretrained("{repo}")`, or with `transformers`'
`GPT2LMHeadModel.from_pretrained("{repo}")`; its tokenizer is GPT-2's.
"""


def push_to_hub(
    model: GPT,
    repo: str,
    *,
    private: bool | None = None,
    token: str | None = None,
    commit_message: str = "Upload a GPT trained in 'Build a GPT from the ground up'",
) -> str:
    """Create (or reuse) the Hub repository ``repo`` and upload the model to it.

    The folder is ``save_pretrained``'s plus a short model card; ``from_pretrained(repo)``
    pulls it back. Needs a token (``hf auth login`` or ``token=``). Returns the commit's URL.
    """
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    with tempfile.TemporaryDirectory(prefix="gpt-push-") as folder:
        save_pretrained(model, folder)
        (Path(folder) / "README.md").write_text(MODEL_CARD.format(repo=repo), encoding="utf-8")
        try:
            api.create_repo(repo, private=private, exist_ok=True)
            commit = api.upload_folder(
                repo_id=repo, folder_path=folder, commit_message=commit_message
            )
        except Exception as error:  # noqa: BLE001 - any failure of the upload becomes one line
            raise HubError(
                f"cannot push to {repo} on the Hugging Face Hub ({_short(_root(error))})"
            ) from None
    return str(getattr(commit, "commit_url", commit))
