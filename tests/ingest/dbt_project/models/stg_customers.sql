select id as customer_id, name as customer_name, country
from {{ source('raw', 'customers') }}
