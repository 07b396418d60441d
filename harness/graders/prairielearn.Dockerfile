# The PrairieLearn external-grader image for a gpu-katas course: Python 3.12, the system
# packages and pip extras the course's katas need (harness/graders/install.sh reads them from the
# manifests), in /opt/gpu-katas-venv, which run_prairielearn.sh uses. Build it from the course
# repository and push it where PrairieLearn pulls images from:
#
#   docker build -f harness/graders/prairielearn.Dockerfile -t you/gpu-katas-grader .
FROM python:3.12-slim-bookworm
COPY . /opt/gpu-katas
RUN bash /opt/gpu-katas/harness/graders/install.sh /opt/gpu-katas /opt/gpu-katas-venv \
    && rm -rf /var/lib/apt/lists/* /root/.cache/pip
