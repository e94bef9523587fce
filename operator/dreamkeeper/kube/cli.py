"""`dreamkeeper operator` and `dreamkeeper seed-vocabulary` (the cycle Job's init container)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

err = Console(stderr=True)


def register(app: typer.Typer) -> None:
    @app.command("operator")
    def operator_command(
        namespace: list[str] = typer.Option(
            [], "--namespace", "-n", help="Serve DreamSchedules in this namespace (repeatable)."
        ),
        all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A", help="Serve every namespace."),
        exclude_namespace: list[str] | None = typer.Option(
            None,
            "--exclude-namespace",
            help="With --all-namespaces: a namespace never served (repeatable; default kube-system, kube-public, "
            "kube-node-lease; --exclude-namespace '' serves every one).",
        ),
        metrics_port: int = typer.Option(8080, help="Port of the Prometheus /metrics endpoint."),
        health_port: int = typer.Option(8081, help="Port of the /healthz liveness endpoint."),
        bind: str = typer.Option(
            "",
            envvar="DREAMKEEPER_BIND",
            help="Address the metrics and health endpoints listen on (default, and when empty: 127.0.0.1; the "
            "chart passes the pod IP).",
        ),
        redact_logs: bool = typer.Option(
            False,
            "--redact-logs",
            envvar="DREAMKEEPER_REDACT_LOGS",
            help="Cycle Jobs log entry ids and counts only, never memory content (for clusters that ship logs).",
        ),
        kubeconfig: str | None = typer.Option(
            None, help="Kubeconfig file (default: in-cluster, else $KUBECONFIG or ~/.kube/config)."
        ),
        job_image: str | None = typer.Option(
            None, envvar="DREAMKEEPER_JOB_IMAGE", help="Image of cycle Jobs when a DreamSchedule names none."
        ),
        job_image_pull_policy: str | None = typer.Option(None, envvar="DREAMKEEPER_JOB_IMAGE_PULL_POLICY"),
        workers: int = typer.Option(8, min=1, max=64, help="Threads for Kubernetes calls."),
        object_workers: int = typer.Option(
            16, min=1, max=1024, help="Objects whose events kopf handles at once (bounds connections and memory)."
        ),
        poll_seconds: float = typer.Option(5.0, min=0.5, help="How often an active cycle Job is polled."),
        log_format: str = typer.Option("json", help="json | text"),
        verbose: bool = typer.Option(False, "--debug", help="Log at DEBUG."),
    ) -> None:
        """Run the operator: DreamSchedule and MemoryVocabulary controllers, metrics and liveness endpoints."""
        from dreamkeeper.kube.jobspec import JobDefaults
        from dreamkeeper.kube.reconcile import ReconcileSettings
        from dreamkeeper.kube.runner import LOOPBACK, SYSTEM_NAMESPACES, OperatorOptions, run_operator

        if log_format not in ("json", "text"):
            err.print(f"[red]error:[/red] --log-format must be json or text, not {log_format!r}")
            raise typer.Exit(2)
        defaults = JobDefaults()
        host = bind.strip() or LOOPBACK
        options = OperatorOptions(
            namespaces=list(namespace),
            all_namespaces=all_namespaces,
            exclude_namespaces=list(SYSTEM_NAMESPACES if exclude_namespace is None else exclude_namespace),
            metrics_host=host,
            metrics_port=metrics_port,
            health_host=host,
            health_port=health_port,
            kubeconfig=kubeconfig or None,
            workers=workers,
            object_workers=object_workers,
            log_format="json" if log_format == "json" else "text",
            verbose=verbose,
            job_defaults=JobDefaults(
                image=job_image or defaults.image,
                image_pull_policy=job_image_pull_policy or None,
                redact_logs=redact_logs,
            ),
            reconcile=ReconcileSettings(poll_seconds=poll_seconds),
        )
        try:
            options.validate()
        except ValueError as exc:
            err.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from None
        run_operator(options)

    @app.command("seed-vocabulary")
    def seed_vocabulary_command(
        source: Path = typer.Option(..., help="The rendered vocabulary (the MemoryVocabulary's ConfigMap file)."),
        destination: Path = typer.Option(..., help="merge-coverage-vocabulary.json in the agent's directory."),
        termination_message_path: Path | None = typer.Option(
            None, help="Write the JSON report here (a container's termination-message file)."
        ),
    ) -> None:
        """Copy SOURCE to DESTINATION only if DESTINATION does not exist. An existing file is never changed.

        Exit 0 when created or already present (the report says which, with the file's sha256), 1 on failure.
        """
        from dreamkeeper.kube.seed import seed_vocabulary

        report = seed_vocabulary(source, destination)
        message = report.to_message()
        typer.echo(message)
        if termination_message_path is not None:
            try:
                termination_message_path.write_text(message, encoding="utf-8")
            except OSError as exc:
                err.print(f"[yellow]warning:[/yellow] cannot write {termination_message_path}: {exc}")
        if report.result == "failed":
            err.print(f"[red]error:[/red] {report.message}")
            raise typer.Exit(1)
