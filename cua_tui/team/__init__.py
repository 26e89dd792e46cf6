"""A team's fleet on PostgreSQL (psycopg 3): the queue's schema, workers that claim and run tasks, the
requests every analyst sees and answers once, and the mirror that lets a run be verified from the database
alone. An adapter above the fleet runner and the builder; nothing below imports it. The design: DESIGN.md,
"Team mode"; the manual: docs/team/."""
