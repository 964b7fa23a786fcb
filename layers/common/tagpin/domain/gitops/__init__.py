"""GitOps: who owns a workload (``owners``), and how a reference to an image is written in a
file of a Git repository, one module per kind of file (``kustomize``, ``helm``, ``manifest``),
each a pure function from text and a ``Pin`` to an ``Edit`` (``yamltext`` does the careful
part: the values change, nothing else does). docs/gitops.md."""
