"""What tests write to and read from the partition store: files whose bytes say which commit they belong
to, and the journal's events in their stored form."""
