"""Soft budgets (``ask_at``): a run that crosses one asks the reviewer whether to go on, with its spend
shown; approving raises that budget by its own amount again, rejecting ends the run ``limit``. The hard caps
(``max_*``, ``deadline_seconds``) still end a run without asking."""

from __future__ import annotations

from dataclasses import dataclass

from .policy import Limits


@dataclass(frozen=True, slots=True)
class Budget:
    """One soft budget: its name, the step it asks at (and is raised by), and the hard cap beside it."""

    name: str  # cost, tokens, steps, seconds
    step: float
    cap: float  # 0: no hard cap

    def amount(self, value: float) -> str:
        if self.name == "cost":
            return f"${value:.2f}"
        if self.name == "seconds":
            return f"{value:.0f} s"
        return f"{value:.0f} {self.name}"


def budgets_of(limits: Limits) -> list[Budget]:
    """The soft budgets a policy names (an ``ask_at_*`` of 0 names none)."""
    found = [
        Budget("cost", limits.ask_at_cost_usd, limits.max_cost_usd),
        Budget("tokens", limits.ask_at_tokens, limits.max_tokens),
        Budget("steps", limits.ask_at_steps, limits.max_steps),
        Budget("seconds", limits.ask_at_seconds, limits.deadline_seconds),
    ]
    return [b for b in found if b.step > 0]


class SoftBudgets:
    """Where each soft budget asks next, raised by its step each time the reviewer says go on."""

    def __init__(self, limits: Limits) -> None:
        self.budgets = {b.name: b for b in budgets_of(limits)}
        self.next = {name: b.step for name, b in self.budgets.items()}

    def crossed(self, spent: dict[str, float]) -> Budget | None:
        """The first budget whose spend has reached where it asks (None: none has)."""
        return next((b for name, b in self.budgets.items() if spent.get(name, 0.0) >= self.next[name]), None)

    def question(self, budget: Budget, spent: float) -> str:
        """What the reviewer is asked, with the spend and what each answer does."""
        cap = f" of its {budget.amount(budget.cap)} cap" if budget.cap else ""
        now, raised = budget.amount(self.next[budget.name]), budget.amount(self.next[budget.name] + budget.step)
        return (
            f"this run has spent {budget.amount(spent)}{cap} (its soft budget is {now}): go on? "
            f"y raises the soft budget to {raised}; n ends the run (limit)"
        )

    def go_on(self, budget: Budget) -> None:
        self.next[budget.name] += budget.step

    def stopped(self, budget: Budget, spent: float) -> str:
        """The run's end reason when the reviewer says no."""
        return f"stopped at its soft {budget.name} budget: {budget.amount(spent)} spent"
