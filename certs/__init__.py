"""dynocerts: making, loading and checking the TLS material of dynolog and dyno."""
