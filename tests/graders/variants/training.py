"""Planted variants of lesson 8, training (solutions/training.py): wrong ones, each
making the mistake it names, and correct ones written differently."""

from __future__ import annotations

from .base import V, Variant, changed

# fit written out; the wrong variants below change one line.
FIT = """
def fit(model, optimizer, train_batches, *, steps, grad_accum, lr_schedule,
        eval_batches=None, eval_every=None):
    batches = _cycle(train_batches)
    history = []
    for step in range(steps):
        lr = lr_schedule(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        micro = [next(batches) for _ in range(grad_accum)]
        record = {"step": step, "lr": lr, "loss": train_step(model, micro, optimizer)}
        due = eval_every is not None and (step + 1) % eval_every == 0
        if eval_batches is not None and (due or step == steps - 1):
            record["eval_loss"] = evaluate(model, eval_batches)
        history.append(record)
    return history
"""

# train_step written out; the wrong variants below change one line.
TRAIN_STEP = """
def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
    model.train()
    total = 0.0
    for x, y in micro_batches:
        loss = next_token_loss(model, x, y)
        (loss / len(micro_batches)).backward()
        total += loss.item()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total / len(micro_batches)
"""

# adamw_step written out; the wrong variants below change one line.
ADAMW = """
    def adamw_step(params, grads, state, *, lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0):
        b1, b2 = betas
        t = state.get("step", 0) + 1
        ms = state.get("exp_avg", [torch.zeros_like(p) for p in params])
        vs = state.get("exp_avg_sq", [torch.zeros_like(p) for p in params])
        out, new_m, new_v = [], [], []
        for p, g, m, v in zip(params, grads, ms, vs):
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            m_hat = m / (1 - b1**t)
            v_hat = v / (1 - b2**t)
            p = p * (1 - lr * weight_decay)
            out.append(p - lr * m_hat / (v_hat.sqrt() + eps))
            new_m.append(m)
            new_v.append(v)
        return out, {"step": t, "exp_avg": new_m, "exp_avg_sq": new_v}
"""

WRONG: list[Variant] = [
    V(
        "training",
        "adamw_step",
        "only-m-corrected",
        "no-bias-correction",
        changed(ADAMW, "v_hat = v / (1 - b2**t)", "v_hat = v"),
    ),
    V(
        "training",
        "adamw_step",
        "no-sqrt",
        "no-sqrt",
        changed(ADAMW, "m_hat / (v_hat.sqrt() + eps)", "m_hat / (v_hat + eps)"),
    ),
    V(
        "training",
        "adamw_step",
        "decay-after-step",
        "decay-after-step",
        changed(
            changed(ADAMW, "            p = p * (1 - lr * weight_decay)\n", ""),
            "out.append(p - lr * m_hat / (v_hat.sqrt() + eps))",
            "out.append((p - lr * m_hat / (v_hat.sqrt() + eps)) * (1 - lr * weight_decay))",
        ),
    ),
    V(
        "training",
        "adamw_step",
        "step-before-increment",
        "step-off-by-one",
        changed(
            changed(ADAMW, 't = state.get("step", 0) + 1', 't = state.get("step", 0)'),
            'return out, {"step": t, "exp_avg"',
            'return out, {"step": t + 1, "exp_avg"',
        ),
    ),
    V(
        "training",
        "adamw_step",
        "no-bias-correction",
        "no-bias-correction",
        changed(
            changed(ADAMW, "m_hat = m / (1 - b1**t)", "m_hat = m"),
            "v_hat = v / (1 - b2**t)",
            "v_hat = v",
        ),
    ),
    V(
        "training",
        "adamw_step",
        "l2-decay",
        "l2-decay",
        changed(
            changed(ADAMW, "p = p * (1 - lr * weight_decay)", "p = p"),
            "m = b1 * m + (1 - b1) * g",
            "g = g + weight_decay * p\n            m = b1 * m + (1 - b1) * g",
        ),
    ),
    V(
        "training",
        "adamw_step",
        "decay-without-lr",
        "decay-without-lr",
        changed(ADAMW, "p = p * (1 - lr * weight_decay)", "p = p * (1 - weight_decay)"),
    ),
    V(
        "training",
        "adamw_step",
        "eps-inside",
        "eps-inside",
        changed(
            ADAMW,
            "out.append(p - lr * m_hat / (v_hat.sqrt() + eps))",
            "out.append(p - lr * m_hat / (v_hat + eps).sqrt())",
        ),
    ),
    V(
        "training",
        "adamw_step",
        "step-off-by-one",
        "step-off-by-one",
        changed(
            changed(ADAMW, "m_hat = m / (1 - b1**t)", "m_hat = m / (1 - b1 ** (t + 1))"),
            "v_hat = v / (1 - b2**t)",
            "v_hat = v / (1 - b2 ** (t + 1))",
        ),
    ),
    V(
        "training",
        "adamw_step",
        "step-count",
        "step-count",
        changed(ADAMW, '{"step": t, "exp_avg"', '{"step": t - 1, "exp_avg"'),
    ),
    V(
        "training",
        "adamw_step",
        "shared-state",
        "shared-state",
        """
        def adamw_step(params, grads, state, *, lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0):
            b1, b2 = betas
            t = state.get("step", 0) + 1
            m = state["exp_avg"][0] if state else torch.zeros_like(params[0])
            v = state["exp_avg_sq"][0] if state else torch.zeros_like(params[0])
            out = []
            for p, g in zip(params, grads):
                m = b1 * m + (1 - b1) * g
                v = b2 * v + (1 - b2) * g * g
                step = lr * (m / (1 - b1**t)) / ((v / (1 - b2**t)).sqrt() + eps)
                out.append(p * (1 - lr * weight_decay) - step)
            n = len(params)
            return out, {"step": t, "exp_avg": [m] * n, "exp_avg_sq": [v] * n}
    """,
    ),
    V(
        "training",
        "adamw_step",
        "in-place",
        "in-place",
        """
        def adamw_step(params, grads, state, *, lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0):
            b1, b2 = betas
            state.setdefault("step", 0)
            state.setdefault("exp_avg", [torch.zeros_like(p) for p in params])
            state.setdefault("exp_avg_sq", [torch.zeros_like(p) for p in params])
            state["step"] += 1
            t = state["step"]
            for p, g, m, v in zip(params, grads, state["exp_avg"], state["exp_avg_sq"]):
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                p.mul_(1 - lr * weight_decay)
                denom = (v / (1 - b2**t)).sqrt() + eps
                p.addcdiv_(m / (1 - b1**t), denom, value=-lr)
            return params, state
    """,
    ),
    V(
        "training",
        "lr_at",
        "zero-start",
        "starts-at-zero",
        """
        def lr_at(step, *, max_lr, min_lr, warmup_steps, max_steps):
            if not 0 <= warmup_steps < max_steps:
                raise ValueError("bad schedule")
            if step < warmup_steps:
                return max_lr * step / warmup_steps
            if step > max_steps:
                return min_lr
            progress = (step - warmup_steps) / (max_steps - warmup_steps)
            return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * progress))
    """,
    ),
    V(
        "training",
        "lr_at",
        "to-zero",
        "ignores-min",
        """
        def lr_at(step, *, max_lr, min_lr, warmup_steps, max_steps):
            if not 0 <= warmup_steps < max_steps:
                raise ValueError("bad schedule")
            if step < warmup_steps:
                return max_lr * (step + 1) / warmup_steps
            if step > max_steps:
                return min_lr
            progress = (step - warmup_steps) / (max_steps - warmup_steps)
            return 0.5 * max_lr * (1.0 + math.cos(math.pi * progress))
    """,
    ),
    V(
        "training",
        "lr_at",
        "keeps-cycling",
        "keeps-cycling",
        """
        def lr_at(step, *, max_lr, min_lr, warmup_steps, max_steps):
            if not 0 <= warmup_steps < max_steps:
                raise ValueError("bad schedule")
            if step < warmup_steps:
                return max_lr * (step + 1) / warmup_steps
            progress = (step - warmup_steps) / (max_steps - warmup_steps)
            return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * progress))
    """,
    ),
    V(
        "training",
        "lr_at",
        "no-validation",
        "no-validation",
        """
        def lr_at(step, *, max_lr, min_lr, warmup_steps, max_steps):
            if step < warmup_steps:
                return max_lr * (step + 1) / warmup_steps
            if step > max_steps:
                return min_lr
            progress = (step - warmup_steps) / max(max_steps - warmup_steps, 1)
            return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * progress))
    """,
    ),
    V(
        "training",
        "lr_at",
        "no-warmup-offset",
        "no-warmup-offset",
        """
        def lr_at(step, *, max_lr, min_lr, warmup_steps, max_steps):
            if not 0 <= warmup_steps < max_steps:
                raise ValueError(f"need 0 <= warmup_steps < max_steps, got {warmup_steps}")
            if step < warmup_steps:
                return max_lr * (step + 1) / warmup_steps
            if step > max_steps:
                return min_lr
            return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * step / max_steps))
    """,
    ),
    V(
        "training",
        "train_step",
        "unscaled",
        "unscaled",
        """
        def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
            model.train()
            total = 0.0
            for x, y in micro_batches:
                loss = next_token_loss(model, x, y)
                loss.backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            optimizer.zero_grad()
            return total / len(micro_batches)
    """,
    ),
    V(
        "training",
        "train_step",
        "not-zeroed",
        "not-zeroed",
        changed(TRAIN_STEP, "    optimizer.zero_grad(set_to_none=True)\n", ""),
    ),
    V(
        "training",
        "train_step",
        "no-clip",
        "no-clip",
        """
        def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
            model.train()
            total = 0.0
            for x, y in micro_batches:
                loss = next_token_loss(model, x, y)
                (loss / len(micro_batches)).backward()
                total += loss.item()
            optimizer.step()
            optimizer.zero_grad()
            return total / len(micro_batches)
    """,
    ),
    V(
        "training",
        "train_step",
        "no-train-mode",
        "eval-mode",
        """
        def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
            total = 0.0
            for x, y in micro_batches:
                loss = next_token_loss(model, x, y)
                (loss / len(micro_batches)).backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            optimizer.zero_grad()
            return total / len(micro_batches)
    """,
    ),
    V(
        "training",
        "train_step",
        "returns-sum",
        "sum",
        changed(
            TRAIN_STEP,
            "    optimizer.zero_grad(set_to_none=True)\n    return total / len(micro_batches)\n",
            "    optimizer.zero_grad()\n    return total\n",
        ),
    ),
    V(
        "training",
        "train_step",
        "token-weighted",
        "token-weighted",
        """
        def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
            model.train()
            counts = [int((y != -100).sum()) for _, y in micro_batches]
            total = 0.0
            for (x, y), n in zip(micro_batches, counts):
                loss = next_token_loss(model, x, y)
                (loss * n / sum(counts)).backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            optimizer.zero_grad()
            return total / len(micro_batches)
    """,
    ),
    V(
        "training",
        "train_step",
        "empties-list",
        "changed-batches",
        """
        def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
            model.train()
            count, total = len(micro_batches), 0.0
            while micro_batches:
                x, y = micro_batches.pop(0)
                loss = next_token_loss(model, x, y)
                (loss / count).backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            optimizer.zero_grad()
            return total / count
    """,
    ),
    V(
        "training",
        "train_step",
        "last-loss",
        "last",
        changed(TRAIN_STEP, "    return total / len(micro_batches)\n", "    return loss.item()\n"),
    ),
    V(
        "training",
        "train_step",
        "scaled-loss",
        "scaled",
        changed(
            TRAIN_STEP,
            "        total += loss.item()\n",
            "        total += (loss / len(micro_batches)).item()\n",
        ),
    ),
    V(
        "training",
        "train_step",
        "zero-in-loop",
        "last-batch-only",
        changed(
            TRAIN_STEP,
            "    for x, y in micro_batches:\n",
            "    for x, y in micro_batches:\n        optimizer.zero_grad()\n",
        ),
    ),
    V(
        "training",
        "train_step",
        "no-step",
        "no-step",
        changed(TRAIN_STEP, "    optimizer.step()\n", ""),
    ),
    V(
        "training",
        "train_step",
        "clamps-ignored",
        "clamps-ignored",
        changed(
            TRAIN_STEP,
            "        loss = next_token_loss(model, x, y)\n",
            "        loss = next_token_loss(model, x, y.clamp(min=0))\n",
        ),
    ),
    V(
        "training",
        "train_step",
        "counts-ignored",
        "counts-ignored",
        changed(
            TRAIN_STEP,
            "        loss = next_token_loss(model, x, y)\n",
            "        logits = model(x).flatten(0, -2)\n"
            '        loss = F.cross_entropy(logits, y.flatten(), reduction="sum") / y.numel()\n',
        ),
    ),
    V(
        "training",
        "evaluate",
        "left-eval",
        "left-eval",
        """
        def evaluate(model, batches):
            model.eval()
            with torch.no_grad():
                losses = [next_token_loss(model, x, y).item() for x, y in batches]
            return sum(losses) / len(losses)
    """,
    ),
    V(
        "training",
        "evaluate",
        "forced-train",
        "forced-train",
        """
        def evaluate(model, batches):
            model.eval()
            with torch.no_grad():
                losses = [next_token_loss(model, x, y).item() for x, y in batches]
            model.train()
            return sum(losses) / len(losses)
    """,
    ),
    V(
        "training",
        "evaluate",
        "with-grad",
        "grad-enabled",
        """
        def evaluate(model, batches):
            was = model.training
            model.eval()
            losses = [next_token_loss(model, x, y).item() for x, y in batches]
            model.train(was)
            return sum(losses) / len(losses)
    """,
    ),
    V(
        "training",
        "evaluate",
        "token-weighted",
        "token-weighted",
        """
        def evaluate(model, batches):
            was = model.training
            model.eval()
            total, count = 0.0, 0
            with torch.no_grad():
                for x, y in batches:
                    n = int((y != -100).sum())
                    total += next_token_loss(model, x, y).item() * n
                    count += n
            model.train(was)
            return total / count
    """,
    ),
    V(
        "training",
        "evaluate",
        "len-of-batches",
        "check:evaluate-one-pass",
        """
        def evaluate(model, batches):
            was = model.training
            model.eval()
            with torch.no_grad():
                total = sum(next_token_loss(model, x, y).item() for x, y in batches)
            model.train(was)
            return total / len(batches)
    """,
    ),
    V(
        "training",
        "evaluate",
        "empties-list",
        "changed-batches",
        """
        def evaluate(model, batches):
            was = model.training
            model.eval()
            losses = []
            with torch.no_grad():
                while batches:
                    x, y = batches.pop()
                    losses.append(next_token_loss(model, x, y).item())
            model.train(was)
            return sum(losses) / len(losses)
    """,
    ),
    V(
        "training",
        "evaluate",
        "sum",
        "sum",
        """
        def evaluate(model, batches):
            was_training = model.training
            model.eval()
            try:
                with torch.no_grad():
                    losses = [next_token_loss(model, x, y).item() for x, y in batches]
            finally:
                model.train(was_training)
            return sum(losses)
    """,
    ),
    V(
        "training",
        "evaluate",
        "never-eval-mode",
        "train-mode",
        """
        def evaluate(model, batches):
            was_training = model.training
            pass
            try:
                with torch.no_grad():
                    losses = [next_token_loss(model, x, y).item() for x, y in batches]
            finally:
                model.train(was_training)
            return sum(losses) / len(losses)
    """,
    ),
    V(
        "training",
        "fit",
        "lr-after-step",
        "lr-after-step",
        """
        def fit(model, optimizer, train_batches, *, steps, grad_accum, lr_schedule,
                eval_batches=None, eval_every=None):
            batches = _cycle(train_batches)
            history = []
            for step in range(steps):
                micro = [next(batches) for _ in range(grad_accum)]
                loss = train_step(model, micro, optimizer)
                lr = lr_schedule(step)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                record = {"step": step, "lr": lr, "loss": loss}
                due = eval_every is not None and (step + 1) % eval_every == 0
                if eval_batches is not None and (due or step == steps - 1):
                    record["eval_loss"] = evaluate(model, eval_batches)
                history.append(record)
            return history
    """,
    ),
    V(
        "training",
        "fit",
        "eval-from-zero",
        "eval-off-by-one",
        changed(
            FIT,
            "        due = eval_every is not None and (step + 1) % eval_every == 0\n",
            "        due = eval_every is not None and step % eval_every == 0\n",
        ),
    ),
    V(
        "training",
        "fit",
        "no-cycle",
        "no-cycle",
        changed(
            FIT, "    batches = _cycle(train_batches)\n", "    batches = iter(train_batches)\n"
        ),
    ),
    V(
        "training",
        "fit",
        "itertools-cycle",
        "cycle-replays",
        changed(
            FIT,
            "    batches = _cycle(train_batches)\n",
            "    import itertools\n    batches = itertools.cycle(train_batches)\n",
        ),
    ),
    V(
        "training",
        "fit",
        "first-group-only",
        "first-group-only",
        changed(
            FIT,
            '        for group in optimizer.param_groups:\n            group["lr"] = lr\n',
            '        optimizer.param_groups[0]["lr"] = lr\n',
        ),
    ),
    V(
        "training",
        "fit",
        "rotates-list",
        "changed-batches",
        """
        def fit(model, optimizer, train_batches, *, steps, grad_accum, lr_schedule,
                eval_batches=None, eval_every=None):
            history = []
            for step in range(steps):
                lr = lr_schedule(step)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                micro = []
                for _ in range(grad_accum):  # the list itself is the queue: take, put back
                    micro.append(train_batches.pop(0))
                    train_batches.append(micro[-1])
                record = {"step": step, "lr": lr, "loss": train_step(model, micro, optimizer)}
                due = eval_every is not None and (step + 1) % eval_every == 0
                if eval_batches is not None and (due or step == steps - 1):
                    record["eval_loss"] = evaluate(model, eval_batches)
                history.append(record)
            return history
    """,
    ),
    V(
        "training",
        "fit",
        "one-batch-a-step",
        "ignores-accum",
        changed(
            FIT,
            "        micro = [next(batches) for _ in range(grad_accum)]\n",
            "        micro = [next(batches) for _ in range(1)]\n",
        ),
    ),
    V(
        "training",
        "fit",
        "lr-not-set",
        "lr-not-set",
        changed(
            FIT, '        for group in optimizer.param_groups:\n            group["lr"] = lr\n', ""
        ),
    ),
    V(
        "training",
        "fit",
        "no-final-eval",
        "no-final-eval",
        changed(
            FIT,
            "        if eval_batches is not None and (due or step == steps - 1):\n",
            "        if eval_batches is not None and due:\n",
        ),
    ),
    V(
        "training",
        "fit",
        "no-eval-without-every",
        "no-final-eval",
        changed(
            FIT,
            "        if eval_batches is not None and (due or step == steps - 1):\n",
            "        scheduled = eval_every is not None and (due or step == steps - 1)\n"
            "        if eval_batches is not None and scheduled:\n",
        ),
    ),
    V(
        "training",
        "fit",
        "restarts-each-step",
        "restarts-each-step",
        changed(
            FIT,
            '            group["lr"] = lr\n',
            '            group["lr"] = lr\n        batches = _cycle(train_batches)\n',
        ),
    ),
]

RIGHT: list[Variant] = [
    V(
        "training",
        "adamw_step",
        "torch-formulation",
        None,
        """
        def adamw_step(params, grads, state, *, lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0):
            b1, b2 = betas
            step = state.get("step", 0) + 1
            new = {"step": step, "exp_avg": [], "exp_avg_sq": []}
            out = []
            for i, (p, g) in enumerate(zip(params, grads)):
                m = state["exp_avg"][i].clone() if state else torch.zeros_like(p)
                v = state["exp_avg_sq"][i].clone() if state else torch.zeros_like(p)
                m.lerp_(g, 1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (v.sqrt() / math.sqrt(1 - b2**step)).add_(eps)
                q = p.clone().mul_(1 - lr * weight_decay)
                q.addcdiv_(m, denom, value=-lr / (1 - b1**step))
                out.append(q)
                new["exp_avg"].append(m)
                new["exp_avg_sq"].append(v)
            return out, new
    """,
    ),
    V(
        "training",
        "lr_at",
        "rewritten",
        None,
        """
        def lr_at(step, *, max_lr, min_lr, warmup_steps, max_steps):
            if warmup_steps < 0 or warmup_steps >= max_steps:
                raise ValueError(f"warmup_steps={warmup_steps}, max_steps={max_steps}")
            if step >= warmup_steps:
                t = min(step - warmup_steps, max_steps - warmup_steps)
                cosine = (math.cos(math.pi * t / (max_steps - warmup_steps)) + 1) / 2
                return min_lr + (max_lr - min_lr) * cosine
            return (step + 1) * max_lr / warmup_steps
    """,
    ),
    V(
        "training",
        "train_step",
        "one-backward",
        None,
        """
        def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
            model.train()
            losses = [next_token_loss(model, x, y) for x, y in micro_batches]
            (torch.stack(losses).sum() / len(losses)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
            return sum(loss.item() for loss in losses) / len(losses)
    """,
    ),
    V(
        "training",
        "evaluate",
        "inference-mode",
        None,
        """
        def evaluate(model, batches):
            was_training = model.training
            model.eval()
            total, count = 0.0, 0
            try:
                with torch.inference_mode():
                    for x, y in batches:
                        total += next_token_loss(model, x, y).item()
                        count += 1
            finally:
                model.train(was_training)
            return total / count
    """,
    ),
    V(
        "training",
        "fit",
        "while-loop",
        None,
        """
        def fit(model, optimizer, train_batches, *, steps, grad_accum, lr_schedule,
                eval_batches=None, eval_every=None):
            it = iter(train_batches)
            history, step = [], 0
            while step < steps:
                for group in optimizer.param_groups:
                    group["lr"] = lr_schedule(step)
                micro = []
                while len(micro) < grad_accum:
                    try:
                        micro.append(next(it))
                    except StopIteration:
                        it = iter(train_batches)
                loss = train_step(model, micro, optimizer)
                history.append({"step": step, "lr": lr_schedule(step), "loss": loss})
                due = step == steps - 1 or (eval_every and (step + 1) % eval_every == 0)
                if eval_batches is not None and due:
                    history[-1]["eval_loss"] = evaluate(model, eval_batches)
                step += 1
            return history
    """,
    ),
]
