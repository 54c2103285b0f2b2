"""What a person reads: the report of a ledger (``lk report``) and what is running now
(``lk status``). Views sit above what they show: the decision's records, the workers'
streams, the state folder."""
