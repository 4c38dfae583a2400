"""The OKF tool handlers the generated registry names, and the cards they answer with."""
