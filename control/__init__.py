"""PID/PD controllers and action normalization (numpy in, numpy out). Arrives with issue 3."""
