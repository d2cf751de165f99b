"""The pipeline as data: stages, the partitions they exchange, and the recovery settings.

Built by ``FailoverPipeline`` when a DAG is parsed, stored with every run (``pipeline.json`` beside its
partitions) and read back by components that never import DAG files. No adapters are made here: the
store and the REST client are built by the layers above, from the names this data carries.
"""
