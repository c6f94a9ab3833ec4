"""Reconcilers of the Trainer controller-manager (one module or package per controller)."""
