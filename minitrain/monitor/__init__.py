"""Monitoring pieces the training loop calls: alerts, early stopping, progress display, quality score, report."""
