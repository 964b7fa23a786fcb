"""Git write-back adapters: repositories over smart HTTP with dulwich (``repositories``; tokens
per host from the secret store and pull/merge requests through the GitHub and GitLab REST APIs
are still to come, issue 28). Only the function that writes to Git imports this package; dulwich
ships in its layer only (docs/gitops.md)."""
