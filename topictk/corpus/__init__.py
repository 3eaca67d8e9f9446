"""Reading raw text and bag-of-words files, building a vocabulary and a held-out split, and the
on-disk corpus store every algorithm reads."""
