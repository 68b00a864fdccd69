"""``agentrl compare``: the same recipe through several frameworks, side by side.

Parity (one recorded batch through each framework's own advantage, correction and loss
code): ``record`` (the batch, scripted by the recipe's environment), ``batch`` (the file format exchanged with
each framework's environment), ``side`` (what each adapter's ``parity`` module shares),
``runner`` (finds each framework's environment and runs its side there), ``reference`` (the
core's numbers), ``table`` and ``report``. Learning (every recipe on every framework's real
trainer, per seed): ``learning`` and ``learning_report``. ``command`` is the CLI.
"""
