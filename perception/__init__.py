"""Point-cloud perception: observation in, features out (numpy in, numpy out). Arrives with issue 3."""
