"""What a score means, computed the same way everywhere: token accounting and perplexity, the table metrics, and the
alert rules over logged metrics."""
