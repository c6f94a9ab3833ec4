"""apimachinery in Python: the object vocabulary every controller and webhook shares.

Generic Kubernetes only (nothing Trainer- or JobSet-specific), one module a job:

=================  ================================================================
``object``         ``Json`` (an object as the API server sends it) and the metadata
                   accessors (``name_of``, ``labels_of``, ...)
``gvk``            the core and batch GroupVersionKinds (Pod, Node, Service, Job, ...)
``times``          ``metav1.Time``: RFC 3339, whole seconds, UTC (format, parse, now)
``duration``       ``metav1.Duration``: Go's ``time.ParseDuration`` with its error texts
``conditions``     ``metav1.Condition`` lists: find, set (``meta.SetStatusCondition``), remove
``field``          ``field.Error`` / ``ErrorList.ToAggregate`` with apimachinery's texts
``validation``     name validation (DNS-1123 subdomain, DNS-1035 label, domain-prefixed path)
``strategicmerge`` strategic merge patch of a ``PodTemplateSpec``
``quantity``       ``resource.Quantity``
=================  ================================================================

The object model at the controller and webhook boundary (one, written down here): **objects
cross every seam of the controllers and the webhooks as JSON dicts** (``Json``), exactly what
the API server sent, so a field this code does not model is never dropped. Typed pydantic
models (``trainer.api``) are a view a runtime plugin builds from a dict when it wants typed
access and dumps back before anything is written; signatures of controllers and webhooks take
``Json``, not ``Model | Mapping``.
"""
