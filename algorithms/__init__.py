"""Learners: advantage estimators, policy losses, the one learner, presets, the training loop."""
