"""What a record holds and how it reaches MLflow: the tracker (the only module importing mlflow),
the spool and writer process, redaction, conditions of measurement, and log_metrics for tasks."""
