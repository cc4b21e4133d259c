from __future__ import annotations

from django.core.management.base import BaseCommand

from processes.demo import set_up_demo


class Command(BaseCommand):
    help = "Create the demo user, team, application and pipeline (idempotent)."

    def handle(self, *args: object, **options: object) -> None:
        demo = set_up_demo()
        out = self.stdout
        out.write(self.style.SUCCESS("BDRE demo is set up."))
        out.write(f"  team:        {demo.team.name}")
        out.write(f"  application: {demo.application.name}")
        for job in demo.jobs:
            steps = ", ".join(s.name for s in job.steps.order_by("id"))
            upstream = sorted(
                {u.name for s in job.steps.all() for u in s.enqueuing_processes.all()}
            )
            source = f" <- {', '.join(upstream)}" if upstream else ""
            out.write(f"  job {job.pk:>3} {job.name}{source}: {steps}")
        out.write("")
        out.write("  UI and admin: http://127.0.0.1:8000/admin/")
        if demo.password:
            out.write(f"  login:       {demo.username} / {demo.password}")
            out.write("  (the password is printed this once; change it in the admin)")
        else:
            out.write(
                f"  login:       {demo.username} (existing user, password unchanged; "
                f"reset it with: manage.py changepassword {demo.username})"
            )
