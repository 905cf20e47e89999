"""Learned baselines (behavior cloning, offline RL) trained on demonstrations. Arrives with issue 6."""
